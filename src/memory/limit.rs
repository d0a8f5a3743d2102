//! How much memory this process may use: the smallest limit of the memory cgroups it is in
//! (v2 `memory.max`, v1 `memory.limit_in_bytes`, from its own cgroup up to the top of the
//! hierarchy as mounted where it runs), or else the machine's memory. A limit set above what
//! a container mounts (a pod's, seen from inside a cgroup namespace) is not visible here.
//! Defaults that must scale with the memory a store really has, such as the cap on filter
//! memory (`Options::filter_memory_share`), read it with [`available`]: in a container of
//! 256 MiB on a machine of 64 GiB, the machine's figure would be the wrong one.
//!
//! Linux only (`cfg(linux_extras)`); elsewhere [`available`] is `None`.

use std::fs;
use std::path::{Component, Path, PathBuf};

/// Bytes this process may use: the smallest memory cgroup limit above it, or the machine's
/// memory when no cgroup limits it; `None` where neither can be read.
pub fn available() -> Option<u64> {
    let cgroup = cgroup_limit();
    let machine = machine_memory();
    match (cgroup, machine) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
    }
}

/// The smallest memory limit of the cgroups this process is in, v2 and v1.
#[cfg(linux_extras)]
fn cgroup_limit() -> Option<u64> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let proc_cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroup_limit_from(&mountinfo, &proc_cgroup)
}

#[cfg(not(linux_extras))]
fn cgroup_limit() -> Option<u64> {
    None
}

/// The smallest memory limit of the cgroups that the texts of /proc/self/mountinfo and
/// /proc/self/cgroup place a process in, read from the cgroup files they point to.
#[cfg_attr(not(linux_extras), allow(dead_code))]
fn cgroup_limit_from(mountinfo: &str, proc_cgroup: &str) -> Option<u64> {
    let found = find_cgroups(mountinfo, proc_cgroup);
    let v2 = found
        .v2
        .and_then(|h| limit_along(&h, "memory.max", parse_v2_limit));
    let v1 = found
        .v1_memory
        .and_then(|h| limit_along(&h, "memory.limit_in_bytes", parse_v1_limit));
    [v2, v1].into_iter().flatten().min()
}

/// The smallest limit in `file` from the process's cgroup up to the hierarchy's mount point:
/// a cgroup's limit holds for everything below it.
fn limit_along(hierarchy: &Hierarchy, file: &str, parse: fn(&str) -> Option<u64>) -> Option<u64> {
    let mut dir = Some(hierarchy.current.as_path());
    let mut smallest: Option<u64> = None;
    while let Some(d) = dir.filter(|d| d.starts_with(&hierarchy.mount_point)) {
        if let Some(limit) = fs::read_to_string(d.join(file))
            .ok()
            .as_deref()
            .and_then(parse)
        {
            smallest = Some(smallest.map_or(limit, |s| s.min(limit)));
        }
        dir = d.parent();
    }
    smallest
}

/// A v2 `memory.max`: bytes, or `max` for none.
fn parse_v2_limit(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A v1 `memory.limit_in_bytes`: bytes, where "no limit" is the largest count of pages the
/// kernel can hold (9223372036854771712 with 4 KiB pages), not a word.
fn parse_v1_limit(text: &str) -> Option<u64> {
    text.trim().parse().ok().filter(|&b: &u64| b < 1 << 62)
}

#[cfg(linux_extras)]
fn machine_memory() -> Option<u64> {
    // SAFETY: sysconf reads configuration values and has no preconditions.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let pages = u64::try_from(pages).ok()?;
    let page_size = u64::try_from(page_size).ok()?;
    pages.checked_mul(page_size).filter(|&b| b > 0)
}

#[cfg(not(linux_extras))]
fn machine_memory() -> Option<u64> {
    None
}

/// One line of /proc/self/mountinfo, the fields this module needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// The directory of the file system that is mounted (field 4): for a cgroup mount, the
    /// cgroup that appears at the mount point, `/` unless only a subtree is mounted.
    root: String,
    /// Where it is mounted (field 5).
    mount_point: PathBuf,
    /// The file system type, after the ` - ` separator: `cgroup` or `cgroup2` here.
    fs_type: String,
    /// Per-mount options (field 6) and super-block options (last field) together: v1 cgroup
    /// mounts name their controllers among the latter.
    options: Vec<String>,
    /// Whether the mount is read-only (`ro` among the per-mount options).
    read_only: bool,
}

/// Parses /proc/self/mountinfo (see proc(5)); malformed lines are skipped.
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // Optional fields (shared:N, master:N, ...) come between field 6 and the "-".
            let dash = fields.iter().skip(6).position(|f| *f == "-")? + 6;
            let root = unescape_octal(fields.get(3)?);
            let mount_point = PathBuf::from(unescape_octal(fields.get(4)?));
            let mount_options = fields.get(5)?;
            let fs_type = fields.get(dash + 1)?.to_string();
            let super_options = fields.get(dash + 3).copied().unwrap_or("");
            let read_only = mount_options.split(',').any(|o| o == "ro");
            let options = mount_options
                .split(',')
                .chain(super_options.split(','))
                .filter(|o| !o.is_empty())
                .map(str::to_string)
                .collect();
            Some(Mount {
                root,
                mount_point,
                fs_type,
                options,
                read_only,
            })
        })
        .collect()
}

/// Undoes mountinfo's escaping of space, tab, newline and backslash as `\ooo`.
fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let digits = bytes.get(i + 1..i + 4);
        match digits {
            Some(d) if bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)) => {
                let value = d.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of /proc/self/cgroup: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupEntry {
    /// The v1 controllers of the hierarchy (`memory`, `name=systemd`, ...); empty for v2.
    controllers: Vec<String>,
    /// The cgroup, relative to the hierarchy's root (or to the cgroup namespace's root).
    path: String,
}

impl CgroupEntry {
    /// Whether this is the unified (v2) hierarchy: id 0 and no controllers.
    fn is_v2(&self) -> bool {
        self.controllers.is_empty()
    }
}

/// Parses /proc/self/cgroup (see cgroups(7)); malformed lines are skipped.
fn parse_proc_cgroup(text: &str) -> Vec<CgroupEntry> {
    text.lines()
        .filter_map(|line| {
            // The path may itself contain ':', so split at the first two only.
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let path = parts.next()?.to_string();
            Some(CgroupEntry { controllers, path })
        })
        .collect()
}

/// A cgroup hierarchy this process can use: where it is mounted and where the process is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where the hierarchy is mounted.
    pub mount_point: PathBuf,
    /// The directory of the cgroup this process is in.
    pub current: PathBuf,
    /// Whether the mount is read-only.
    pub read_only: bool,
}

/// The hierarchies that might hold a memory limit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Found {
    /// The unified hierarchy, if a cgroup2 file system is mounted (whether it has the memory
    /// controller is read from its files later).
    pub v2: Option<Hierarchy>,
    /// The v1 hierarchy with the memory controller, if mounted.
    pub v1_memory: Option<Hierarchy>,
}

/// Finds the v2 and v1-memory hierarchies from the texts of /proc/self/mountinfo and
/// /proc/self/cgroup, and this process's cgroup directory in each.
pub fn find_cgroups(mountinfo: &str, proc_cgroup: &str) -> Found {
    let mounts = parse_mountinfo(mountinfo);
    let entries = parse_proc_cgroup(proc_cgroup);
    let locate = |is_mount: &dyn Fn(&Mount) -> bool, entry: Option<&CgroupEntry>| {
        let entry = entry?;
        // A hierarchy may be mounted more than once, or only a subtree of it: use the first
        // mount that shows the process's cgroup.
        mounts.iter().filter(|m| is_mount(m)).find_map(|m| {
            Some(Hierarchy {
                mount_point: m.mount_point.clone(),
                current: cgroup_dir(m, &entry.path)?,
                read_only: m.read_only,
            })
        })
    };
    Found {
        v2: locate(
            &|m| m.fs_type == "cgroup2",
            entries.iter().find(|e| e.is_v2()),
        ),
        v1_memory: locate(
            &|m| m.fs_type == "cgroup" && m.options.iter().any(|o| o == "memory"),
            entries
                .iter()
                .find(|e| e.controllers.iter().any(|c| c == "memory")),
        ),
    }
}

/// The directory of cgroup `path` under `mount`, or None when the mount does not show it
/// (it mounts a different subtree) or the path is not a plain absolute path.
fn cgroup_dir(mount: &Mount, path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    let root = Path::new(&mount.root);
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    let rest = path.strip_prefix(root).ok()?;
    if rest.as_os_str().is_empty() {
        // The mount's own root: no trailing separator.
        return Some(mount.mount_point.clone());
    }
    Some(mount.mount_point.join(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's layout: cgroup v1 controllers, plus a cgroup2 mount without controllers.
    const V1_MOUNTINFO: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const V1_CGROUP: &str = "\
9:name=systemd:/
4:memory:/process_api/1cf3ef28
1:cpu:/
0::/
";

    /// A systemd machine with pure cgroup v2.
    const V2_MOUNTINFO: &str = "\
24 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw,errors=remount-ro
28 24 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";
    const V2_CGROUP: &str = "0::/user.slice/user-1000.slice/session-2.scope\n";

    #[test]
    fn parses_mountinfo() {
        let mounts = parse_mountinfo(V1_MOUNTINFO);
        assert_eq!(mounts.len(), 6);
        assert_eq!(
            mounts[3],
            Mount {
                root: "/".into(),
                mount_point: "/sys/fs/cgroup/memory".into(),
                fs_type: "cgroup".into(),
                options: ["rw", "nosuid", "nodev", "noexec", "relatime", "rw", "memory"]
                    .map(String::from)
                    .to_vec(),
                read_only: false,
            }
        );
        assert_eq!(mounts[5].fs_type, "cgroup2");
        assert_eq!(mounts[5].mount_point, Path::new("/sys/fs/cgroup/unified"));

        let mounts = parse_mountinfo(V2_MOUNTINFO);
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[1].fs_type, "cgroup2");
        assert_eq!(mounts[1].mount_point, Path::new("/sys/fs/cgroup"));

        // Escaped blanks, a read-only mount, a subtree root, and lines that are not mountinfo.
        let odd = "\
50 1 0:40 /docker/abc /mnt/my\\040cgroups ro,relatime - cgroup cg rw,memory
garbage
1 2 3 4 5 6 no separator here
";
        let mounts = parse_mountinfo(odd);
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].root, "/docker/abc");
        assert_eq!(mounts[0].mount_point, Path::new("/mnt/my cgroups"));
        assert!(mounts[0].read_only);
        assert_eq!(unescape_octal("a\\134b\\011c\\9"), "a\\b\tc\\9");
    }

    #[test]
    fn parses_proc_self_cgroup() {
        let entries = parse_proc_cgroup(V1_CGROUP);
        assert_eq!(entries.len(), 4);
        assert_eq!(
            entries[1],
            CgroupEntry {
                controllers: vec!["memory".into()],
                path: "/process_api/1cf3ef28".into(),
            }
        );
        assert!(!entries[0].is_v2());
        assert!(entries[3].is_v2());
        assert_eq!(entries[3].path, "/");

        let entries = parse_proc_cgroup("5:cpu,cpuacct:/a:b\n0::/x\nnonsense\n");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].controllers, ["cpu", "cpuacct"]);
        assert_eq!(entries[0].path, "/a:b");
        assert!(entries[1].is_v2());
    }

    #[test]
    fn finds_cgroup_directories() {
        let found = find_cgroups(V1_MOUNTINFO, V1_CGROUP);
        assert_eq!(
            found.v1_memory,
            Some(Hierarchy {
                mount_point: "/sys/fs/cgroup/memory".into(),
                current: "/sys/fs/cgroup/memory/process_api/1cf3ef28".into(),
                read_only: false,
            })
        );
        assert_eq!(
            found.v2,
            Some(Hierarchy {
                mount_point: "/sys/fs/cgroup/unified".into(),
                current: "/sys/fs/cgroup/unified".into(),
                read_only: false,
            })
        );

        let found = find_cgroups(V2_MOUNTINFO, V2_CGROUP);
        assert_eq!(found.v1_memory, None);
        assert_eq!(
            found.v2.map(|h| h.current),
            Some("/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope".into())
        );

        // A container that mounts only its own subtree: paths are relative to the mount root.
        let mountinfo =
            "60 50 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n";
        let found = find_cgroups(mountinfo, "4:memory:/docker/abc/inner\n");
        let v1 = found.v1_memory.expect("subtree mount");
        assert_eq!(v1.current, Path::new("/sys/fs/cgroup/memory/inner"));
        assert!(v1.read_only);
        // ...and one whose mount does not show the process's cgroup.
        assert_eq!(
            find_cgroups(mountinfo, "4:memory:/elsewhere\n").v1_memory,
            None
        );
        assert_eq!(
            find_cgroups(mountinfo, "4:memory:/docker/abc/../x\n").v1_memory,
            None
        );

        // Nothing mounted, or nothing readable.
        assert_eq!(find_cgroups("", ""), Found::default());
        assert_eq!(find_cgroups(V1_MOUNTINFO, ""), Found::default());
    }

    #[test]
    fn reads_limits_in_either_version() {
        assert_eq!(parse_v2_limit("max\n"), None);
        assert_eq!(parse_v2_limit("268435456\n"), Some(256 << 20));
        assert_eq!(parse_v1_limit("9223372036854771712\n"), None);
        assert_eq!(parse_v1_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(parse_v1_limit("garbage"), None);
    }

    #[test]
    fn the_smallest_limit_on_the_way_up_holds() {
        let root = tempfile::tempdir().unwrap();
        let outer = root.path().join("outer");
        let inner = outer.join("inner");
        fs::create_dir_all(&inner).unwrap();
        fs::write(root.path().join("memory.max"), "max\n").unwrap();
        fs::write(outer.join("memory.max"), "1048576\n").unwrap();
        fs::write(inner.join("memory.max"), "max\n").unwrap();
        let hierarchy = Hierarchy {
            mount_point: root.path().to_path_buf(),
            current: inner.clone(),
            read_only: false,
        };
        assert_eq!(
            limit_along(&hierarchy, "memory.max", parse_v2_limit),
            Some(1 << 20)
        );
        fs::write(inner.join("memory.max"), "4096\n").unwrap();
        assert_eq!(
            limit_along(&hierarchy, "memory.max", parse_v2_limit),
            Some(4096)
        );
        // Nothing above the mount point counts.
        let below = Hierarchy {
            mount_point: outer.clone(),
            current: outer.clone(),
            read_only: false,
        };
        fs::write(outer.join("memory.max"), "max\n").unwrap();
        fs::write(root.path().join("memory.max"), "1\n").unwrap();
        assert_eq!(limit_along(&below, "memory.max", parse_v2_limit), None);
    }

    /// Cgroup trees of either version, made in a temporary directory that mountinfo names
    /// as the mount point, read as the process's own would be.
    #[test]
    fn reads_the_limit_of_the_cgroup_the_texts_point_to() {
        let root = tempfile::tempdir().unwrap();
        let mount = root.path().join("memory");
        let own = mount.join("pods/p1");
        fs::create_dir_all(&own).unwrap();
        let write = |dir: &Path, file: &str, text: &str| fs::write(dir.join(file), text).unwrap();
        let mountinfo = format!(
            "35 31 0:32 / {} rw,relatime - cgroup cgroup rw,memory\n",
            mount.display()
        );
        let proc_cgroup = "4:memory:/pods/p1\n1:cpu:/\n";
        write(&mount, "memory.limit_in_bytes", "9223372036854771712\n");
        write(&mount.join("pods"), "memory.limit_in_bytes", "536870912\n");
        write(&own, "memory.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(cgroup_limit_from(&mountinfo, proc_cgroup), Some(512 << 20));
        // v1 ignores v2's file, and the reverse.
        write(&own, "memory.max", "1024\n");
        assert_eq!(cgroup_limit_from(&mountinfo, proc_cgroup), Some(512 << 20));

        let v2_mountinfo = format!(
            "28 24 0:25 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            mount.display()
        );
        let v2_cgroup = "0::/pods/p1\n";
        write(&mount.join("pods"), "memory.max", "max\n");
        write(&own, "memory.max", "268435456\n");
        assert_eq!(cgroup_limit_from(&v2_mountinfo, v2_cgroup), Some(256 << 20));
        write(&own, "memory.max", "max\n");
        assert_eq!(cgroup_limit_from(&v2_mountinfo, v2_cgroup), None);
        // A process in no memory cgroup, or a cgroup the mount does not show.
        assert_eq!(cgroup_limit_from(&mountinfo, "1:cpu:/\n"), None);
        assert_eq!(cgroup_limit_from(&v2_mountinfo, "0::/elsewhere\n"), None);
    }

    #[test]
    fn the_machines_memory_is_read_on_linux() {
        if cfg!(linux_extras) {
            let machine = machine_memory();
            assert!(machine.is_some_and(|m| m >= 64 << 20), "{machine:?}");
            assert!(available().is_some());
        }
    }
}
