//! The `kvtool` command line, driven as a user drives it: the built binary, its exit codes,
//! stdout and stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const KVTOOL: &str = env!("CARGO_BIN_EXE_kvtool");

/// What one run of kvtool did.
struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

impl Run {
    fn out(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    fn lines(&self) -> Vec<String> {
        self.out().lines().map(str::to_string).collect()
    }

    /// Asserts success and returns stdout.
    fn ok(&self) -> String {
        assert_eq!(self.code, 0, "expected success; stderr: {}", self.stderr);
        self.out()
    }

    /// Asserts the exit code and that stderr is exactly one `kvtool: ...` line holding
    /// `needle` (after any `note: ` lines, which say what opening the store recovered);
    /// returns that line.
    fn fails(&self, code: i32, needle: &str) -> String {
        assert_eq!(
            self.code,
            code,
            "exit code; stdout: {} stderr: {}",
            self.out(),
            self.stderr
        );
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.starts_with("note: "))
            .collect();
        assert!(
            self.stderr.ends_with('\n') && errors.len() == 1,
            "stderr must be exactly one line besides notes, got {:?}",
            self.stderr
        );
        let line = errors[0];
        assert!(line.starts_with("kvtool: "), "stderr: {:?}", self.stderr);
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        assert!(
            line.contains(needle),
            "stderr {:?} should mention {needle:?}",
            self.stderr
        );
        line.to_string()
    }

    /// Asserts a usage error as clap prints it: exit 2, `error: ` and the message, (mostly) the
    /// command's usage, and where to read more; returns stderr.
    fn usage_error(&self, needle: &str) -> &str {
        assert_eq!(self.code, 2, "exit code; stderr: {}", self.stderr);
        assert!(self.stdout.is_empty(), "stdout: {}", self.out());
        assert!(self.stderr.starts_with("error: "), "{}", self.stderr);
        assert!(
            self.stderr.contains(needle),
            "stderr {:?} should mention {needle:?}",
            self.stderr
        );
        assert!(
            self.stderr
                .ends_with("\n\nFor more information, try '--help'.\n"),
            "{}",
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        &self.stderr
    }
}

fn run_with(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(KVTOOL)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RUST_BACKTRACE", "1")
        .spawn()
        .expect("kvtool starts");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        // A kvtool that fails before reading its input closes the pipe early.
        if let Err(e) = pipe.write_all(input) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
        }
    }
    let output = child.wait_with_output().expect("kvtool finishes");
    Run {
        code: output.status.code().expect("kvtool exits, not killed"),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// `kvtool --db DIR ARGS...`.
fn kv(db: &Path, args: &[&str]) -> Run {
    let mut all = vec!["--db", db.to_str().expect("UTF-8 temp path")];
    all.extend_from_slice(args);
    run_with(&all, None)
}

/// `kvtool --db DIR ARGS...` with `input` on stdin.
fn kv_stdin(db: &Path, args: &[&str], input: &[u8]) -> Run {
    let mut all = vec!["--db", db.to_str().expect("UTF-8 temp path")];
    all.extend_from_slice(args);
    run_with(&all, Some(input))
}

/// What a run with stderr on a terminal did: its exit code, stdout, and what it drew on the
/// terminal.
struct TerminalRun {
    code: i32,
    stdout: String,
    terminal: String,
}

/// Runs kvtool with stderr on a pseudo-terminal of 120 columns, as a user at a terminal runs
/// it, so that what is drawn only on terminals (progress) is drawn.
fn run_on_terminal(args: &[&str]) -> TerminalRun {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors, which are then owned here and nowhere else.
    let (master, slave) = unsafe {
        let rc = libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        );
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // Children that other tests spawn must not inherit the terminal: a copy of it kept
        // open would keep the reader below waiting for them.
        for fd in [master, slave] {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        (
            std::fs::File::from(OwnedFd::from_raw_fd(master)),
            OwnedFd::from_raw_fd(slave),
        )
    };
    let mut command = Command::new(KVTOOL);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave));
    let child = command.spawn().expect("kvtool starts");
    // The terminal reports its end once no process holds it: the child's copy is the last.
    drop(command);
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut drawn = Vec::new();
        let mut buf = [0u8; 4096];
        // Linux answers EIO once the other side is closed.
        while let Ok(n @ 1..) = master.read(&mut buf) {
            drawn.extend_from_slice(&buf[..n]);
        }
        drawn
    });
    let output = child.wait_with_output().expect("kvtool finishes");
    let drawn = reader.join().expect("the terminal reader");
    TerminalRun {
        code: output.status.code().expect("kvtool exits, not killed"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        terminal: String::from_utf8_lossy(&drawn).into_owned(),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("0x");
    for b in bytes {
        s.push_str(&format!("{b:02X}"));
    }
    s
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let db = tmp.path().join("db");
    (tmp, db)
}

fn table_files(db: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(db)
        .expect("store dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    found.sort();
    found
}

fn stats_json(db: &Path) -> Value {
    serde_json::from_str(&kv(db, &["stats", "--json"]).ok()).expect("stats --json is JSON")
}

/// `n` pairs `key000000<TAB>value-000000-...` as `load` input.
/// Asserts that each phase's progress was shown on the terminal.
fn assert_on_terminal(run: &TerminalRun, phases: &[&str]) {
    for phase in phases {
        assert!(
            run.terminal.contains(phase),
            "no {phase:?} on the terminal: {:?}",
            run.terminal
        );
    }
}

fn numbered_pairs(n: usize) -> String {
    (0..n)
        .map(|i| format!("key{i:06}\tvalue-{i:06}-{}\n", "v".repeat(i % 40)))
        .collect()
}

#[test]
fn keyspace_option_reads_and_writes_one_keyspace() {
    let (_tmp, db) = store();
    kv(&db, &["put", "k", "default"]).ok();
    // The option may come before the command or after it.
    kv(&db, &["--keyspace", "users", "put", "k", "alice"]).ok();
    kv_stdin(&db, &["load", "--keyspace", "emails"], b"a@x\t1\nb@x\t2\n").ok();
    assert_eq!(kv(&db, &["get", "k"]).ok(), "default\n");
    assert_eq!(
        kv(&db, &["get", "k", "--keyspace", "users"]).ok(),
        "alice\n"
    );
    kv(&db, &["get", "k", "--keyspace", "emails"]).fails(1, "no such key");
    assert_eq!(
        kv(&db, &["dump", "--keyspace", "emails"]).ok(),
        "a@x\t1\nb@x\t2\n"
    );
    assert_eq!(
        kv(
            &db,
            &["scan", "--keyspace", "emails", "--reverse", "--keys-only"]
        )
        .ok(),
        "b@x\na@x\n"
    );
    kv(&db, &["delete", "k", "--keyspace", "users"]).ok();
    kv(&db, &["get", "k", "--keyspace", "users"]).fails(1, "no such key");
    // Reads and deletes never make a keyspace: a missing one is an error naming those there.
    let missing = kv(&db, &["get", "k", "--keyspace", "nope"]).fails(2, "no keyspace");
    assert!(missing.contains("default, users, emails"), "{missing}");
    kv(&db, &["delete", "k", "--keyspace", "nope"]).fails(2, "no keyspace");
    kv(&db, &["put", "k", "v", "--keyspace", ""]).fails(2, "name");
    kv(&db, &["check", "--keyspace", "users"]).usage_error("--keyspace");

    let stats = kv(&db, &["stats"]).ok();
    assert!(stats.contains("keyspace "), "{stats}");
    for name in ["default", "users", "emails"] {
        assert!(stats.lines().any(|l| l.starts_with(name)), "{stats}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&kv(&db, &["stats", "--json", "--keyspace", "emails"]).ok()).unwrap();
    assert_eq!(json["totals"]["entries"], 2, "{json}");
    assert_eq!(json["keyspaces"][2]["name"], "emails");
    assert_eq!(json["keyspaces"][2]["entries"], 2);
}

#[test]
fn put_get_delete() {
    let (_tmp, db) = store();
    kv(&db, &["put", "apple", "red"]).ok();
    kv(&db, &["put", "banana", "yellow"]).ok();
    assert_eq!(kv(&db, &["get", "apple"]).ok(), "red\n");
    assert_eq!(kv(&db, &["get", "banana"]).ok(), "yellow\n");

    kv(&db, &["put", "apple", "green"]).ok();
    assert_eq!(kv(&db, &["get", "apple"]).ok(), "green\n");

    kv(&db, &["delete", "apple"]).ok();
    let missing = kv(&db, &["get", "apple"]);
    missing.fails(1, "no such key");
    assert!(missing.stdout.is_empty());
    kv(&db, &["get", "cherry"]).fails(1, "cherry");
    // Deleting an absent key is not an error.
    kv(&db, &["delete", "cherry"]).ok();
    assert_eq!(kv(&db, &["get", "banana"]).ok(), "yellow\n");
}

#[test]
fn deleterange_deletes_from_begin_up_to_end() {
    let (_tmp, db) = store();
    for key in ["a", "b", "c", "d"] {
        kv(&db, &["put", key, "v"]).ok();
    }
    kv(&db, &["deleterange", "b", "d"]).ok();
    assert_eq!(kv(&db, &["scan", "--keys-only"]).ok(), "a\nd\n");
    // Binary ends, hex-coded; and a keyspace of its own.
    kv(&db, &["--hex", "put", "0x00ff", "0x01"]).ok();
    kv(&db, &["--hex", "deleterange", "0x00", "0x0100"]).ok();
    kv(&db, &["--hex", "get", "0x00ff"]).fails(1, "no such key");
    kv(&db, &["deleterange", "a", "z", "--keyspace", "nope"]).fails(2, "no keyspace");
    kv(&db, &["deleterange", "a"]).usage_error("<END>");
    assert_eq!(kv(&db, &["get", "a"]).ok(), "v\n");
    assert!(kv(&db, &["stats"]).ok().contains("range deletions  2"));
}

#[test]
fn hex_keys_and_values_carry_binary_data() {
    let (_tmp, db) = store();
    let key = [0u8, 0xff, b'\t', b'\n', b'\\'];
    let value = [0x80u8, 0, 0, 1, b'\r'];
    kv(&db, &["--hex", "put", &hex(&key), &hex(&value)]).ok();
    assert_eq!(
        kv(&db, &["--hex", "get", &hex(&key)]).ok(),
        format!("{}\n", hex(&value))
    );
    // Lower-case digits and a 0X prefix are accepted too.
    assert_eq!(
        kv(&db, &["--hex", "get", "0X00ff090a5c"]).ok(),
        format!("{}\n", hex(&value))
    );
    // Without --hex the same pair prints escaped.
    assert_eq!(
        kv(&db, &["get", "\\x00\\xff\\x09\\x0a\\\\"]).ok(),
        "\\x80\\x00\\x00\\x01\\x0d\n"
    );
    // The empty key and the empty value are legal.
    kv(&db, &["--hex", "put", "0x", "0x"]).ok();
    assert_eq!(kv(&db, &["--hex", "get", "0x"]).ok(), "0x\n");
}

#[test]
fn printable_utf8_prints_as_text() {
    let (_tmp, db) = store();
    kv(&db, &["put", "clé", "été 中 😀"]).ok();
    assert_eq!(kv(&db, &["get", "clé"]).ok(), "été 中 😀\n");
    assert_eq!(kv(&db, &["scan"]).lines(), ["clé ==> été 中 😀"]);
    assert_eq!(kv(&db, &["dump"]).ok(), "clé\tété 中 😀\n");
    assert_eq!(
        kv(&db, &["--hex", "get", &hex("clé".as_bytes())]).ok(),
        format!("{}\n", hex("été 中 😀".as_bytes()))
    );
    // Characters that print as nothing, as blank space or that reorder the text after them
    // are escaped, byte by byte, like control bytes and invalid UTF-8.
    kv(&db, &["put", "k", "a\u{202e}b\u{a0}c\u{85}d\\xff\\x01"]).ok();
    assert_eq!(
        kv(&db, &["get", "k"]).ok(),
        "a\\xe2\\x80\\xaeb\\xc2\\xa0c\\xc2\\x85d\\xff\\x01\n"
    );
    let stats = stats_json(&db);
    let tables = stats["tables"].as_array().unwrap();
    assert!(tables.iter().any(|t| t["smallest_key"] == "clé"), "{stats}");
}

#[test]
fn bad_hex_and_bad_escapes_exit_2() {
    let (_tmp, db) = store();
    kv(&db, &["put", "k", "v"]).ok();
    kv(&db, &["--hex", "get", "abcd"]).fails(2, "must start with 0x");
    kv(&db, &["--hex", "get", "0xabc"]).fails(2, "odd number of digits");
    kv(&db, &["--hex", "put", "0x6b", "0xzz"]).fails(2, "not hex");
    kv(&db, &["--hex", "scan", "--from", "nothex"]).fails(2, "not hex");
    kv(&db, &["get", "a\\q"]).fails(2, "bad escape");
    kv(&db, &["put", "a\\x4", "v"]).fails(2, "bad escape");
    // Nothing was written by the failed commands.
    assert_eq!(kv(&db, &["dump"]).ok(), "k\tv\n");
}

#[test]
fn missing_store_fails_for_every_command_but_put_and_load() {
    let (tmp, db) = store();
    for args in [
        &["get", "k"][..],
        &["delete", "k"],
        &["scan"],
        &["dump"],
        &["stats"],
        &["stats", "--json"],
        &["check"],
        &["compact"],
    ] {
        kv(&db, args).fails(2, "no bloomkv store");
        assert!(!db.exists(), "{args:?} must not create the store");
    }
    // An empty directory is no store either.
    std::fs::create_dir(&db).unwrap();
    kv(&db, &["get", "k"]).fails(2, "no bloomkv store");
    kv(&db, &["check"]).fails(2, "no bloomkv store");

    // put and load create it.
    let other = tmp.path().join("other");
    kv(&db, &["put", "k", "v"]).ok();
    assert_eq!(kv(&db, &["get", "k"]).ok(), "v\n");
    kv_stdin(&other, &["load"], b"a\t1\n").ok();
    assert_eq!(kv(&other, &["get", "a"]).ok(), "1\n");
}

#[test]
fn commands_need_db() {
    for args in [&["get", "k"][..], &["dump"], &["check"], &["compact"]] {
        let run = run_with(args, None);
        let stderr = run.usage_error("needs the store's directory: --db <DIR>");
        assert!(
            stderr.contains(&format!("Usage: kvtool {} ", args[0])),
            "{stderr}"
        );
    }
}

#[test]
fn check_without_current_says_there_is_no_store() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(50).as_bytes()).ok();
    kv(&db, &["compact"]).ok();
    std::fs::remove_file(db.join("CURRENT")).unwrap();
    let line = kv(&db, &["check"]).fails(2, "no bloomkv store");
    assert!(line.contains("CURRENT"), "{line}");
    kv(&db, &["get", "key000001"]).fails(2, "no bloomkv store");
    // Creating a fresh store here would delete the tables as garbage: refused.
    kv(&db, &["put", "k", "v"]).fails(2, "no CURRENT file");
    kv_stdin(&db, &["load"], b"k\tv\n").fails(2, "refusing to create a new store");
    assert!(!table_files(&db).is_empty(), "the tables are still there");
}

#[test]
fn usage_errors_print_clap_usage_and_exit_2() {
    let (_tmp, db) = store();
    kv(&db, &["put", "k", "v"]).ok();
    let stderr = kv(&db, &["frobnicate"])
        .usage_error("unrecognized subcommand 'frobnicate'")
        .to_string();
    assert!(stderr.contains("\n\nUsage: kvtool "), "{stderr}");
    kv(&db, &[]).usage_error("requires a subcommand");
    let stderr = kv(&db, &["get"]).usage_error("<KEY>").to_string();
    assert!(stderr.contains("Usage: kvtool get <KEY>"), "{stderr}");
    assert_eq!(
        stderr.matches("--help").count(),
        1,
        "one pointer to --help: {stderr}"
    );
    kv(&db, &["scan", "--limit", "many"]).usage_error("invalid value 'many' for '--limit <N>'");
    kv(&db, &["--filter-fpr", "abc", "put", "k", "v"]).usage_error("'abc'");
    kv(
        &db,
        &["--filter-fpr", "0.1", "--no-filter", "put", "k", "v"],
    )
    .usage_error("'--filter-fpr <P>' cannot be used with '--no-filter'");
    // Read commands write no table, so they take no filter option.
    kv(&db, &["--filter-fpr", "0.1", "get", "k"]).usage_error("does not apply to 'get'");
    // A rate clap parses but the filter cannot have is kvtool's own one-line error.
    kv(&db, &["--filter-fpr", "2", "put", "a", "b"]).fails(2, "false-positive rate 2");
    kv(&db, &["--filter-fpr", "0", "delete", "k"]).fails(2, "false-positive rate");
    assert_eq!(kv(&db, &["get", "a"]).code, 1, "the bad put wrote nothing");

    // Without arguments, the help, on stderr, as a usage error.
    let bare = run_with(&[], None);
    assert_eq!(bare.code, 2);
    assert!(bare.stdout.is_empty());
    assert!(bare.stderr.contains("Usage: kvtool"), "{}", bare.stderr);
    assert!(bare.stderr.contains("Commands:\n  put"), "{}", bare.stderr);
    // Help is not an error.
    let help = run_with(&["--help"], None);
    assert!(help.ok().contains("Usage"));
    assert!(run_with(&["scan", "--help"], None)
        .ok()
        .contains("--keys-only"));
}

/// The help sections of `kvtool ARGS -h`: heading, then the option or argument lines.
fn help_sections(args: &[&str]) -> Vec<(String, Vec<String>)> {
    let help = run_with(args, None).ok();
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in help.lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|l| !l.starts_with(' ')) {
            sections.push((heading.to_string(), Vec::new()));
        } else if let (Some(section), true) = (sections.last_mut(), line.starts_with("  ")) {
            section.1.push(line.trim().to_string());
        } else if !line.is_empty() {
            sections.push((String::new(), Vec::new()));
        }
    }
    sections
}

/// The names of the options (or arguments) in one help section of `kvtool ARGS -h`.
fn help_entries(args: &[&str], heading: &str) -> Vec<String> {
    help_sections(args)
        .into_iter()
        .filter(|(h, _)| h == heading)
        .flat_map(|(_, lines)| lines)
        .map(|l| l.split("  ").next().unwrap().to_string())
        .collect()
}

#[test]
fn every_argument_has_a_description() {
    let commands = help_entries(&["-h"], "Commands");
    assert!(commands.len() > 10, "{commands:?}");
    for command in commands.iter().filter(|c| *c != "help") {
        for (heading, lines) in help_sections(&[command, "-h"]) {
            if !["Arguments", "Options", "Common options"].contains(&heading.as_str()) {
                continue;
            }
            for line in lines {
                let description = line.split_once("  ").map(|(_, d)| d.trim());
                assert!(
                    description.is_some_and(|d| !d.is_empty()),
                    "{command}: no description for {line:?}"
                );
            }
        }
    }
}

#[test]
fn each_command_help_lists_only_the_common_options_it_takes() {
    let common = |command: &str| help_entries(&[command, "-h"], "Common options");
    let all = [
        "--db <DIR>",
        "--hex",
        "--keyspace <NAME>",
        "--filter-fpr <P>",
        "--no-filter",
    ];
    for command in ["put", "delete", "load"] {
        assert_eq!(common(command), all, "{command}");
    }
    for command in ["get", "scan", "dump", "stats"] {
        let read = ["--db <DIR>", "--hex", "--keyspace <NAME>"];
        assert_eq!(common(command), read, "{command}");
    }
    assert_eq!(
        common("compact"),
        ["--db <DIR>", "--filter-fpr <P>", "--no-filter"]
    );
    assert_eq!(common("check"), ["--db <DIR>"]);
    assert_eq!(common("repair"), ["--db <DIR>"]);
    assert_eq!(common("sst"), ["--hex"]);
    assert_eq!(common("bench"), ["--db <DIR>"]);
    // A command's own options are listed apart from the common ones.
    let own = help_entries(&["scan", "-h"], "Options");
    assert!(own.contains(&"--keys-only".to_string()), "{own:?}");
    assert!(!own.iter().any(|o| o.starts_with("--db")), "{own:?}");
    assert_eq!(help_entries(&["-h"], "Common options"), all);
}

#[test]
fn common_options_go_before_or_after_the_command() {
    let (tmp, db) = store();
    let dir = db.to_str().unwrap();
    run_with(&["put", "--db", dir, "--hex", "0x6b", "0x76"], None).ok();
    assert_eq!(run_with(&["--db", dir, "get", "k"], None).ok(), "v\n");
    assert_eq!(
        run_with(&["--hex", "get", "--db", dir, "0x6b"], None).ok(),
        "0x76\n"
    );
    run_with(&["--db", dir, "get", "--db", dir, "k"], None)
        .usage_error("'--db <DIR>' is given both before and after 'get'");
    run_with(
        &[
            "--filter-fpr",
            "0.1",
            "put",
            "--db",
            dir,
            "--no-filter",
            "a",
            "b",
        ],
        None,
    )
    .usage_error("'--filter-fpr <P>' cannot be used with '--no-filter'");
    // An option a command does not take is refused, not ignored.
    let table = table_files(&db)[0].to_str().unwrap().to_string();
    let refused = run_with(&["--db", dir, "sst", &table], None);
    let stderr = refused.usage_error("'--db <DIR>' does not apply to 'sst'");
    assert!(stderr.contains("Usage: kvtool sst "), "{stderr}");
    run_with(&["sst", "--db", dir, &table], None).usage_error("unexpected argument '--db'");
    run_with(&["--no-filter", "bench", "--keys", "10"], None)
        .usage_error("'--no-filter' does not apply to 'bench'");
    run_with(&["--db", dir, "--hex", "check"], None)
        .usage_error("'--hex' does not apply to 'check'");
    assert!(!tmp.path().join("bench").exists());
}

#[test]
fn scan_options() {
    let (_tmp, db) = store();
    let input = "a1\tv1\na2\tv2\na3\tv3\nb1\tw1\nb2\tw2\nc\tx\n";
    kv_stdin(&db, &["load", "-"], input.as_bytes()).ok();
    kv(&db, &["delete", "a2"]).ok();

    assert_eq!(
        kv(&db, &["scan"]).lines(),
        [
            "a1 ==> v1",
            "a3 ==> v3",
            "b1 ==> w1",
            "b2 ==> w2",
            "c ==> x"
        ]
    );
    assert_eq!(
        kv(&db, &["scan", "--prefix", "b"]).lines(),
        ["b1 ==> w1", "b2 ==> w2"]
    );
    // --from is inclusive, --to exclusive.
    assert_eq!(
        kv(&db, &["scan", "--from", "a3", "--to", "b2"]).lines(),
        ["a3 ==> v3", "b1 ==> w1"]
    );
    assert_eq!(
        kv(&db, &["scan", "--from", "a15"]).lines(),
        ["a3 ==> v3", "b1 ==> w1", "b2 ==> w2", "c ==> x"]
    );
    assert_eq!(
        kv(&db, &["scan", "--limit", "2"]).lines(),
        ["a1 ==> v1", "a3 ==> v3"]
    );
    assert!(kv(&db, &["scan", "--limit", "0"]).ok().is_empty());
    assert_eq!(
        kv(&db, &["scan", "--keys-only"]).lines(),
        ["a1", "a3", "b1", "b2", "c"]
    );
    assert_eq!(
        kv(
            &db,
            &["scan", "--prefix", "a", "--from", "a2", "--keys-only"]
        )
        .lines(),
        ["a3"]
    );
    assert_eq!(
        kv(
            &db,
            &["scan", "--prefix", "b", "--limit", "1", "--keys-only"]
        )
        .lines(),
        ["b1"]
    );
    assert!(kv(&db, &["scan", "--prefix", "zz"]).ok().is_empty());
    assert_eq!(
        kv(&db, &["--hex", "scan", "--prefix", "0x63"]).lines(),
        ["0x63 ==> 0x78"]
    );
    // --reverse: the same ranges, last key first; --limit counts from the end.
    assert_eq!(
        kv(&db, &["scan", "--reverse", "--keys-only"]).lines(),
        ["c", "b2", "b1", "a3", "a1"]
    );
    assert_eq!(
        kv(&db, &["scan", "--reverse", "--from", "a3", "--to", "b2"]).lines(),
        ["b1 ==> w1", "a3 ==> v3"]
    );
    assert_eq!(
        kv(&db, &["scan", "--reverse", "--prefix", "a", "--limit", "1"]).lines(),
        ["a3 ==> v3"]
    );
    assert_eq!(
        kv(
            &db,
            &[
                "scan",
                "--reverse",
                "--prefix",
                "b",
                "--to",
                "b2",
                "--keys-only"
            ]
        )
        .lines(),
        ["b1"]
    );
    // What scan prints, load reads back.
    let (_tmp2, copy) = store();
    let printed = kv(&db, &["scan"]).stdout;
    kv_stdin(&copy, &["load", "--strict"], &printed).ok();
    assert_eq!(kv(&copy, &["dump"]).ok(), kv(&db, &["dump"]).ok());
}

/// Keys and values no line-based format carries unescaped.
fn awkward_pairs() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b"plain".to_vec(), b"value".to_vec()),
        (b"tab\tkey".to_vec(), b"tab\tvalue".to_vec()),
        (b"new\nline".to_vec(), b"line\nbreak\r\n".to_vec()),
        (b"back\\slash".to_vec(), b"\\x41 is not A".to_vec()),
        (vec![0xff, 0xfe, 0x00, 0x80], vec![0xc3, 0x28, 0xa0, 0xa1]),
        (b"arrow ==> key".to_vec(), b"arrow ==> value".to_vec()),
        (b"ends in ==>".to_vec(), b"==> starts".to_vec()),
        (b"==>".to_vec(), b"=> ==".to_vec()),
        (b"empty value".to_vec(), Vec::new()),
        (Vec::new(), b"empty key".to_vec()),
        (b" spaces ".to_vec(), b"  ".to_vec()),
        (
            "clé 中 😀".as_bytes().to_vec(),
            "\u{202e}reversed\u{a0}\u{85}".as_bytes().to_vec(),
        ),
        ((0..=255u8).collect(), (0..=255u8).rev().collect()),
    ]
}

fn put_all_hex(db: &Path, pairs: &[(Vec<u8>, Vec<u8>)]) {
    for (k, v) in pairs {
        kv(db, &["--hex", "put", &hex(k), &hex(v)]).ok();
    }
}

fn assert_holds(db: &Path, pairs: &[(Vec<u8>, Vec<u8>)]) {
    for (k, v) in pairs {
        assert_eq!(
            kv(db, &["--hex", "get", &hex(k)]).ok(),
            format!("{}\n", hex(v)),
            "key {}",
            hex(k)
        );
    }
    let mut sorted: Vec<_> = pairs.to_vec();
    sorted.sort();
    let expected: Vec<String> = sorted
        .iter()
        .map(|(k, v)| format!("{}\t{}", hex(k), hex(v)))
        .collect();
    assert_eq!(kv(db, &["--hex", "dump"]).lines(), expected);
}

#[test]
fn dump_load_round_trip_escaped() {
    let (_tmp, db) = store();
    let pairs = awkward_pairs();
    put_all_hex(&db, &pairs);
    let dumped = kv(&db, &["dump"]);
    let text = dumped.ok();
    // One line per pair, one TAB per line: every awkward byte is escaped.
    assert_eq!(text.lines().count(), pairs.len());
    assert!(text.lines().all(|l| l.matches('\t').count() == 1));
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() && c != '\t' && c != '\n'),
        "{text:?}"
    );

    let (_tmp2, copy) = store();
    let loaded = kv_stdin(&copy, &["load", "--strict"], &dumped.stdout);
    loaded.ok();
    assert_eq!(
        loaded.stderr,
        format!("loaded {} pairs\n", pairs.len()),
        "the progress bar stays off a non-terminal stderr"
    );
    assert_holds(&copy, &pairs);
    assert_eq!(kv(&copy, &["dump"]).stdout, dumped.stdout);
}

#[test]
fn dump_load_round_trip_hex() {
    let (tmp, db) = store();
    let pairs = awkward_pairs();
    put_all_hex(&db, &pairs);
    let dumped = kv(&db, &["--hex", "dump"]);
    dumped.ok();
    let file = tmp.path().join("dump.txt");
    std::fs::write(&file, &dumped.stdout).unwrap();

    let copy = tmp.path().join("copy");
    kv(
        &copy,
        &["--hex", "load", "--strict", file.to_str().unwrap()],
    )
    .ok();
    assert_holds(&copy, &pairs);
    // Hex dump lines are not escaped text: loading them without --hex would store the
    // literal digits, and with --hex a plain-text dump is refused.
    let plain = kv(&db, &["dump"]).stdout;
    kv_stdin(&copy, &["--hex", "load", "--strict"], &plain).fails(2, "line 1");
}

#[test]
fn scan_output_with_the_separator_in_a_key_loads_back_exactly() {
    let (_tmp, db) = store();
    kv(&db, &["put", "a ==> b", "c"]).ok();
    kv(&db, &["put", "a", "va"]).ok();
    let printed = kv(&db, &["scan"]);
    // The '>' of a '==>' inside a key or value is escaped: one ' ==> ' per line.
    assert_eq!(printed.lines(), ["a ==> va", "a ==\\x3e b ==> c"]);
    assert_eq!(
        kv(&db, &["scan", "--keys-only"]).lines(),
        ["a", "a ==\\x3e b"]
    );

    let (_tmp2, copy) = store();
    let loaded = kv_stdin(&copy, &["load", "--strict"], &printed.stdout);
    loaded.ok();
    assert_eq!(loaded.stderr, "loaded 2 pairs\n");
    assert_eq!(kv(&copy, &["get", "a ==> b"]).ok(), "c\n");
    assert_eq!(kv(&copy, &["get", "a"]).ok(), "va\n");
    assert_eq!(kv(&copy, &["dump"]).stdout, kv(&db, &["dump"]).stdout);
}

#[test]
fn scan_load_round_trip_escaped_and_hex() {
    let (_tmp, db) = store();
    let pairs = awkward_pairs();
    put_all_hex(&db, &pairs);
    for format in [&[][..], &["--hex"]] {
        let scan_args: Vec<&str> = format.iter().copied().chain(["scan"]).collect();
        let printed = kv(&db, &scan_args);
        let text = printed.ok();
        assert_eq!(text.lines().count(), pairs.len());
        assert!(
            text.lines()
                .all(|l| l.matches("==>").count() == 1 && !l.contains('\t')),
            "{text}"
        );
        let (_tmp2, copy) = store();
        let load_args: Vec<&str> = format.iter().copied().chain(["load", "--strict"]).collect();
        kv_stdin(&copy, &load_args, &printed.stdout).ok();
        assert_holds(&copy, &pairs);
        assert_eq!(kv(&copy, &scan_args).stdout, printed.stdout);
    }
}

#[test]
fn load_refuses_lines_that_split_more_than_one_way() {
    let (tmp, db) = store();
    let input = b"a ==> b ==> c\nd\te\tf\ng ==> h\ti\nok ==> fine\nj==>k\nalso\tfine\n";
    let loaded = kv_stdin(&db, &["load"], input);
    assert_eq!(loaded.code, 3, "{}", loaded.stderr);
    assert!(
        loaded.stderr.starts_with(
            "loaded 2 pairs, skipped 4 bad lines (first: line 1: '==>' appears 2 times"
        ),
        "{}",
        loaded.stderr
    );
    assert_eq!(kv(&db, &["scan"]).lines(), ["also ==> fine", "ok ==> fine"]);

    let strict = tmp.path().join("strict");
    for (line, error) in [
        (&b"a ==> b ==> c\n"[..], "line 1: '==>' appears 2 times"),
        (b"d\te\tf\n", "line 1: 2 TABs"),
        (b"g ==> h\ti\n", "line 1: both a TAB and '==>'"),
        (
            b"j==>k\n",
            "line 1: no TAB or ' ==> ' between key and value",
        ),
    ] {
        kv_stdin(&strict, &["load", "--strict"], line).fails(2, error);
    }
    // Each failed before its first pair: no store was left behind.
    assert!(!strict.exists());
}

#[test]
fn load_reads_raw_bytes_and_counts_bad_lines() {
    let (tmp, db) = store();
    let mut input = Vec::new();
    input.extend_from_slice(b"good1\tone\n");
    input.extend_from_slice(b"no separator here\n");
    input.extend_from_slice(b"\n"); // blank lines are skipped, not bad
    input.extend_from_slice(b"raw\xff\x01\tbytes\xfe\n");
    input.extend_from_slice(b"bad\\escape\tx\n");
    input.extend_from_slice(b"good2 ==> two\r\n");
    input.extend_from_slice(b"good3\tthree"); // no final newline
    let loaded = kv_stdin(&db, &["load"], &input);
    assert_eq!(loaded.code, 3, "{}", loaded.stderr);
    assert_eq!(
        loaded.stderr,
        "loaded 4 pairs, skipped 2 bad lines (first: line 2: no TAB or ' ==> ' between key \
         and value)\n"
    );
    assert_eq!(kv(&db, &["get", "good1"]).ok(), "one\n");
    assert_eq!(kv(&db, &["get", "good2"]).ok(), "two\n");
    assert_eq!(kv(&db, &["get", "good3"]).ok(), "three\n");
    assert_eq!(
        kv(&db, &["--hex", "get", &hex(b"raw\xff\x01")]).ok(),
        format!("{}\n", hex(b"bytes\xfe"))
    );
    kv(&db, &["get", "no separator here"]).fails(1, "no such key");

    // --strict stops at the first bad line and names it; the lines before it are in.
    let strict_db = tmp.path().join("strict");
    let line = kv_stdin(&strict_db, &["load", "--strict"], &input).fails(2, "line 2:");
    assert!(line.contains("(1 pair before it was loaded)"), "{line}");
    assert_eq!(kv(&strict_db, &["get", "good1"]).ok(), "one\n");
    kv(&strict_db, &["get", "good2"]).fails(1, "no such key");

    let bad_at_5 = b"a\t1\nb\t2\nc\t3\nd\t4\ne\\x\t5\nf\t6\n";
    let line =
        kv_stdin(&strict_db, &["load", "--strict"], bad_at_5).fails(2, "line 5: key: bad escape");
    assert!(line.ends_with("(4 pairs before it were loaded)"), "{line}");
    let bad_at_1 = b"e\\x\t5\nf\t6\n";
    let line = kv_stdin(&strict_db, &["load", "--strict"], bad_at_1).fails(2, "line 1:");
    assert!(line.ends_with("(nothing was loaded)"), "{line}");
    // Into a store of its own, a load that loaded nothing leaves no store behind.
    let fresh = tmp.path().join("fresh");
    kv_stdin(&fresh, &["load", "--strict"], bad_at_1).fails(2, "(nothing was loaded)");
    assert!(!fresh.exists(), "a failed strict load created the store");
    let given = tmp.path().join("given");
    std::fs::create_dir(&given).unwrap();
    std::fs::write(given.join("notes.txt"), "mine").unwrap();
    kv_stdin(&given, &["load", "--strict"], bad_at_1).fails(2, "(nothing was loaded)");
    let left: Vec<String> = std::fs::read_dir(&given)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["notes.txt"]);
    // Into a store that exists, it changes nothing of it.
    assert_eq!(kv(&strict_db, &["get", "d"]).ok(), "4\n");

    // A missing input file is an error before the store is touched.
    let nowhere = tmp.path().join("nowhere");
    kv(&nowhere, &["load", "/no/such/file.txt"]).fails(2, "cannot read /no/such/file.txt");
    assert!(!nowhere.exists());
}

#[test]
fn load_exit_status_says_whether_lines_were_skipped() {
    let (tmp, db) = store();
    let all_good = kv_stdin(&db, &["load"], b"a\t1\n");
    assert_eq!(
        (all_good.code, all_good.stderr.as_str()),
        (0, "loaded 1 pair\n")
    );
    let empty = kv_stdin(&db, &["load"], b"");
    assert_eq!((empty.code, empty.stderr.as_str()), (0, "loaded 0 pairs\n"));
    // Lines skipped: exit 3, whether or not other lines loaded.
    let some_bad = kv_stdin(&db, &["load"], b"b\t2\nbad\nc\t3\n");
    assert_eq!(some_bad.code, 3);
    assert!(
        some_bad
            .stderr
            .starts_with("loaded 2 pairs, skipped 1 bad line (first: line 2: "),
        "{}",
        some_bad.stderr
    );
    let all_bad = kv_stdin(&db, &["load"], b"bad\nworse\n");
    assert_eq!(all_bad.code, 3);
    assert!(
        all_bad
            .stderr
            .starts_with("loaded 0 pairs, skipped 2 bad lines (first: line 1: "),
        "{}",
        all_bad.stderr
    );
    assert_eq!(kv(&db, &["scan", "--keys-only"]).lines(), ["a", "b", "c"]);
    // With --strict a bad line is an error.
    let strict = tmp.path().join("strict");
    kv_stdin(&strict, &["load", "--strict"], b"bad\n").fails(2, "line 1:");
}

#[test]
fn large_load_from_file_with_batches() {
    let (tmp, db) = store();
    // Over a MiB: long enough for the progress bar, which must not draw on a pipe.
    let n = 25_000;
    let input = numbered_pairs(n);
    assert!(input.len() > 1 << 20);
    let file = tmp.path().join("pairs.tsv");
    std::fs::write(&file, &input).unwrap();
    let loaded = kv(&db, &["load", file.to_str().unwrap()]);
    loaded.ok();
    assert_eq!(loaded.stderr, format!("loaded {n} pairs\n"));
    assert_eq!(kv(&db, &["dump"]).ok(), input);
    assert_eq!(
        kv(&db, &["get", "key012345"]).ok(),
        format!("value-012345-{}\n", "v".repeat(12345 % 40))
    );
    let stats = stats_json(&db);
    assert_eq!(stats["totals"]["entries"], n as u64);
}

#[test]
fn key_over_the_size_limit_exits_2() {
    let (tmp, db) = store();
    let limit = 64 * 1024;
    let too_long = "k".repeat(limit + 1);
    kv(&db, &["put", &too_long, "v"]).fails(2, "key of 65537 bytes exceeds the limit of 65536");
    kv(&db, &["get", &too_long]).fails(2, "exceeds the limit");
    // Exactly at the limit is fine.
    let longest = "k".repeat(limit);
    kv(&db, &["put", &longest, "v"]).ok();
    assert_eq!(kv(&db, &["get", &longest]).ok(), "v\n");

    // Through load, with --hex: a bad line, or with --strict a failure naming the line.
    let line = format!("0x6f6b\t0x01\n{}\t0x02\n", hex(too_long.as_bytes()));
    let file = tmp.path().join("big.txt");
    std::fs::write(&file, line).unwrap();
    let loaded = kv(&db, &["--hex", "load", file.to_str().unwrap()]);
    assert_eq!(loaded.code, 3, "{}", loaded.stderr);
    assert!(
        loaded
            .stderr
            .contains("loaded 1 pair, skipped 1 bad line (first: line 2: key of 65537 bytes"),
        "{}",
        loaded.stderr
    );
    assert_eq!(kv(&db, &["get", "ok"]).ok(), "\\x01\n");
    kv(&db, &["--hex", "load", "--strict", file.to_str().unwrap()])
        .fails(2, "line 2: key of 65537 bytes exceeds the limit");
}

#[test]
fn store_held_by_another_process_exits_2() {
    let (_tmp, db) = store();
    kv(&db, &["put", "k", "v"]).ok();
    // The LOCK is a record lock: held by this process, a kvtool child cannot take it.
    let holder = bloomkv::Db::open(&db, bloomkv::Options::default()).expect("open");
    for args in [
        &["get", "k"][..],
        &["put", "k", "w"],
        &["scan"],
        &["dump"],
        &["stats"],
        &["compact"],
    ] {
        kv(&db, args).fails(2, "LOCK");
    }
    kv_stdin(&db, &["load"], b"a\tb\n").fails(2, "already open");
    // check reads one consistent view under the lock: beside a writer it says so, rather
    // than report files a compaction replaces as damaged.
    kv(&db, &["check"]).fails(2, "already open");
    holder.close().expect("close");
    // Closing releases the lock at once: a child another test thread is spawning at that
    // moment does not inherit a record lock.
    assert_eq!(kv(&db, &["get", "k"]).ok(), "v\n");
}

#[test]
fn check_names_the_damaged_table_and_offset() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(2000).as_bytes()).ok();
    kv(&db, &["compact"]).ok();
    let report = kv(&db, &["check"]);
    assert!(report.ok().ends_with("OK\n"), "{}", report.out());
    assert!(report.out().contains("(2000 entries)"));

    let table = table_files(&db)
        .into_iter()
        .next()
        .expect("a table after compact");
    let props: Value =
        serde_json::from_str(&run_with(&["sst", "--json", table.to_str().unwrap()], None).ok())
            .unwrap();
    let data_size = props["data_size"].as_u64().unwrap();
    assert!(props["data_blocks"].as_u64().unwrap() > 2);
    // Data blocks come first in the file; damage a byte in the middle of them.
    let mut bytes = std::fs::read(&table).unwrap();
    let at = (data_size / 2) as usize;
    bytes[at] ^= 0x55;
    std::fs::write(&table, &bytes).unwrap();

    let name = table.file_name().unwrap().to_str().unwrap().to_string();
    let damaged = kv(&db, &["check"]);
    let line = damaged.fails(2, &name);
    assert!(line.contains("offset"), "{line}");
    assert!(line.contains("1 damaged file"), "{line}");
    assert!(
        damaged
            .out()
            .contains(&format!("damage: corruption in {}", table.display())),
        "{}",
        damaged.out()
    );
    // The offset named is that of the block holding the damaged byte.
    let offset: u64 = line
        .split("at offset ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {line}"));
    assert!(offset <= at as u64 && at as u64 - offset < 8192, "{line}");

    run_with(&["sst", table.to_str().unwrap()], None).fails(2, &name);
}

#[test]
fn compact_merges_into_one_level() {
    let (_tmp, db) = store();
    for i in 0..5 {
        kv_stdin(
            &db,
            &["load"],
            format!("k{i}\t{i}\nshared\t{i}\n").as_bytes(),
        )
        .ok();
    }
    kv(&db, &["delete", "k0"]).ok();
    kv(&db, &["compact"]).ok();
    let after = stats_json(&db);
    let levels: Vec<u64> = after["levels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["tables"].as_u64().unwrap() > 0)
        .map(|l| l["level"].as_u64().unwrap())
        .collect();
    assert_eq!(levels.len(), 1, "{after}");
    // Old versions and the tombstone are gone: k1..k4 and shared.
    assert_eq!(after["totals"]["entries"], 5);
    assert_eq!(
        kv(&db, &["scan", "--keys-only"]).lines(),
        ["k1", "k2", "k3", "k4", "shared"]
    );
    assert_eq!(kv(&db, &["get", "shared"]).ok(), "4\n");
}

#[test]
fn stats_shows_tables_filters_and_counters() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(1000).as_bytes()).ok();
    kv(&db, &["--filter-fpr", "0.001", "compact"]).ok();

    let stats = stats_json(&db);
    for field in [
        "levels",
        "tables",
        "totals",
        "counters",
        "filter_memory_bytes",
        "last_sequence",
    ] {
        assert!(
            stats.get(field).is_some(),
            "stats --json lacks {field}: {stats}"
        );
    }
    for counter in [
        "filter_probes",
        "filter_negatives",
        "filter_positives",
        "filter_true_positives",
        "data_block_reads",
        "bytes_read",
        "flushes",
        "compactions",
    ] {
        assert!(stats["counters"][counter].is_u64(), "{counter}: {stats}");
    }
    assert_eq!(stats["last_sequence"], 1000);
    let tables = stats["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 1);
    let t = &tables[0];
    assert_eq!(t["entries"], 1000);
    assert!(t["file_size"].as_u64().unwrap() > 0);
    assert!(t["filter_bytes"].as_u64().unwrap() > 0);
    // 0.1%: about 14.4 bits per key; the table's own prediction is near the target.
    assert!(t["bits_per_key"].as_u64().unwrap() >= 14, "{t}");
    assert!(t["hashes"].as_u64().unwrap() >= 7, "{t}");
    let fpr = t["predicted_false_positive_rate"].as_f64().unwrap();
    assert!(fpr > 0.0 && fpr < 0.002, "{fpr}");
    assert_eq!(t["smallest_key"], "key000000");
    assert_eq!(t["largest_key"], "key000999");
    let level = t["level"].as_u64().unwrap() as usize;
    assert_eq!(stats["levels"][level]["tables"], 1);
    assert_eq!(stats["levels"][level]["entries"], 1000);
    assert_eq!(stats["levels"][level]["bytes"], t["file_size"]);

    let text = kv(&db, &["stats"]).ok();
    let number = t["number"].as_u64().unwrap();
    let row = text
        .lines()
        .find(|l| l.starts_with(&format!("{number:06}.sst")))
        .unwrap_or_else(|| panic!("no row for the table in\n{text}"));
    assert!(row.contains(&format!("{fpr:.6}")), "{row}");
    assert!(text.contains("filter probes"), "{text}");
    assert!(text.contains("data block reads"), "{text}");

    // kvtool holds every filter whole, whatever its own memory: a limit made from it would
    // describe the tool, not the store's owner.
    assert_eq!(stats["filter_memory_limit_bytes"], Value::Null, "{stats}");
    assert_eq!(stats["tables_filter_shrunk"], 0, "{stats}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("filter memory bytes"))
        .unwrap_or_else(|| panic!("no filter memory line in\n{text}"));
    assert!(
        line.contains(&format!("{} (no limit)", stats["filter_memory_bytes"])),
        "{line}"
    );
}

/// `stats` is a read-only open, yet reports what the writers before it wrote: the totals live
/// in the manifest. Write amplification is the bytes of WAL and tables over the bytes loaded.
#[test]
fn stats_reports_write_amplification_over_the_store_life() {
    let (_tmp, db) = store();
    let pairs = numbered_pairs(2000);
    kv_stdin(&db, &["load"], pairs.as_bytes()).ok();
    kv(&db, &["compact"]).ok();
    let stats = stats_json(&db);
    let writes = &stats["writes"];
    let user = writes["user_bytes"].as_u64().unwrap();
    // Each line is a key, a tab and a value: the key and value bytes are the line less one.
    let loaded: usize = pairs.lines().map(|l| l.len() - 1).sum();
    assert_eq!(user, loaded as u64, "{writes}");
    let wal = writes["wal_bytes"].as_u64().unwrap();
    let tables = writes["flush_bytes"].as_u64().unwrap()
        + writes["compaction_bytes_written"].as_u64().unwrap();
    assert!(wal > user && tables > 0, "{writes}");
    let amplification = writes["write_amplification"].as_f64().unwrap();
    assert!((amplification - (wal + tables) as f64 / user as f64).abs() < 1e-9);
    assert!(writes["stall_seconds"].is_f64(), "{writes}");
    let written: u64 = stats["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["bytes_written"].as_u64().unwrap())
        .sum();
    assert_eq!(written, tables);
    let text = kv(&db, &["stats"]).ok();
    let row = text
        .lines()
        .find(|l| l.contains("write amplification"))
        .unwrap_or_else(|| panic!("no write amplification in\n{text}"));
    assert!(row.ends_with(&format!(" {amplification:.2}")), "{row}");
}

#[test]
fn filter_policy_applies_to_tables_written() {
    let (tmp, db) = store();
    kv_stdin(
        &db,
        &["--no-filter", "load"],
        numbered_pairs(300).as_bytes(),
    )
    .ok();
    kv(&db, &["--no-filter", "put", "extra", "x"]).ok();
    // The tables were written by the commands that had the data: a later command with the
    // default policy finds them filterless.
    let stats = stats_json(&db);
    let tables = stats["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2, "{stats}");
    for t in tables {
        assert!(t["bits_per_key"].is_null(), "{t}");
        assert!(t["hashes"].is_null(), "{t}");
        assert!(t["predicted_false_positive_rate"].is_null(), "{t}");
        assert_eq!(t["filter_bytes"], 0);
    }
    assert_eq!(stats["filter_memory_bytes"], 0);
    let text = kv(&db, &["stats"]).ok();
    assert!(
        text.lines()
            .filter(|l| l.contains(".sst"))
            .all(|l| l.contains("none")),
        "{text}"
    );

    let sst = run_with(&["sst", table_files(&db)[0].to_str().unwrap()], None).ok();
    assert_eq!(sst_field(&sst, "filter"), "none");
    assert_eq!(sst_field(&sst, "filter size"), "0");

    // compact rewrites with the filter asked for.
    // A compaction writes a Ribbon filter in the memory the policy gives a Bloom filter, at
    // the lower rate it buys there: below 10%, far above the default policy's.
    kv(&db, &["--filter-fpr", "0.1", "compact"]).ok();
    let stats = stats_json(&db);
    let t = &stats["tables"][0];
    assert!(t["bits_per_key"].as_u64().unwrap() < 10, "{t}");
    assert_eq!(t["filter_kind"], "ribbon", "{t}");
    let rate = t["predicted_false_positive_rate"].as_f64().unwrap();
    assert!(rate > 0.02 && rate <= 0.1, "{t}");

    // And the default is 1%.
    let other = tmp.path().join("default");
    kv(&other, &["put", "a", "b"]).ok();
    let t = &stats_json(&other)["tables"][0];
    assert_eq!(t["bits_per_key"], 10);
    assert!((t["predicted_false_positive_rate"].as_f64().unwrap() - 0.0094).abs() < 0.001);
}

/// The value of one `name  value` row of `kvtool sst`.
fn sst_field(text: &str, name: &str) -> String {
    text.lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| l.len() > 16)
        .find(|l| l[..16].trim_end() == name)
        .map(|l| l[16..].trim().to_string())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn sst_shows_one_tables_properties() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(500).as_bytes()).ok();
    kv(&db, &["delete", "key000007"]).ok();
    let table = table_files(&db)[0].clone();
    let text = run_with(&["sst", table.to_str().unwrap()], None).ok();
    let field = |name: &str| sst_field(&text, name);
    assert_eq!(field("entries"), "500");
    assert_eq!(field("tombstones"), "0");
    assert_eq!(field("smallest key"), "key000000");
    assert_eq!(field("largest key"), "key000499");
    assert_eq!(
        field("filter"),
        "bloom, 10 bits per key, 5 hashes, predicted fpr 0.009430"
    );
    assert!(text.ends_with("checksums: OK\n"));
    // sst works on the table alone and does not need the store to be closed.
    let alone = run_with(&["--hex", "sst", "--json", table.to_str().unwrap()], None);
    let props: Value = serde_json::from_str(&alone.ok()).unwrap();
    assert_eq!(props["entries"], 500);
    assert_eq!(props["smallest_key"], hex(b"key000000"));
    assert_eq!(props["filter"]["bits_per_key"], 10);
    assert_eq!(props["filter"]["hashes"], 5);
    assert!(props["file_size"].as_u64().unwrap() > props["data_size"].as_u64().unwrap());

    // The delete went into a table of its own.
    let newest = table_files(&db).last().unwrap().clone();
    let text = run_with(&["sst", newest.to_str().unwrap()], None).ok();
    assert_eq!(sst_field(&text, "tombstones"), "1");
    assert_eq!(sst_field(&text, "entries"), "1");

    run_with(&["sst", "/no/such/000001.sst"], None).fails(2, "no such table file");
    let not_a_table = db.join("CURRENT");
    run_with(&["sst", not_a_table.to_str().unwrap()], None).fails(2, "CURRENT");
}

#[test]
fn bench_says_which_directory_is_wrong_and_why() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let small = [
        "bench",
        "--keys",
        "100",
        "--lookups",
        "10",
        "--cold-lookups",
        "10",
    ];
    let in_dir = |dir: &Path| -> Vec<String> {
        let mut args = vec!["--db".to_string(), dir.display().to_string()];
        args.extend(small.iter().map(|a| a.to_string()));
        args
    };
    let args = in_dir(&missing);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let line = run_with(&args, None).fails(
        2,
        &format!(
            "cannot make the bench's stores in {}: no such directory",
            missing.display()
        ),
    );
    assert!(!line.contains("os error"), "{line}");

    let file = tmp.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let args = in_dir(&file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_with(&args, None).fails(2, "not a directory");

    // A result file that cannot be written is named before the run, not after it.
    let json = missing.join("run.json");
    let mut args = in_dir(tmp.path());
    args.extend(["--json".to_string(), json.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let failed = run_with(&args, None);
    failed.fails(
        2,
        &format!(
            "cannot write {}: no such directory {}",
            json.display(),
            missing.display()
        ),
    );
    assert!(
        failed.stdout.is_empty(),
        "the bench did not run: {}",
        failed.out()
    );
}

/// `bench` over 20,000 keys with few lookups (seconds, not minutes), then `more`.
fn small_bench<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "bench",
        "--keys",
        "20000",
        "--lookups",
        "2000",
        "--cold-lookups",
        "200",
    ];
    args.extend_from_slice(more);
    args
}

#[test]
fn bench_shows_each_phase_on_a_terminal_and_nothing_on_a_pipe() {
    let args = small_bench(&["--settings", "0.01"]);
    let run = run_on_terminal(&args);
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert_on_terminal(
        &run,
        &[
            "load (0.01)",
            "compactions (0.01)",
            "cold present (0.01)",
            "cold absent (0.01)",
            "into the page cache (0.01)",
            "warm present (0.01)",
            "warm absent (0.01)",
        ],
    );
    assert!(
        run.stdout.starts_with("bloomkv bench: 20000 keys"),
        "{}",
        run.stdout
    );

    let piped = run_with(&args, None);
    assert_eq!(piped.stderr, "", "progress stays off a pipe");
    assert_eq!(piped.lines()[0], run.stdout.lines().next().unwrap());
}

#[test]
fn bench_stores_shows_each_phase_of_each_store_on_a_terminal() {
    let run = run_on_terminal(&[
        "bench",
        "--stores",
        "bloomkv",
        "--keys",
        "20000",
        "--lookups",
        "2000",
    ]);
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert_on_terminal(
        &run,
        &[
            "bloomkv: running in a process of its own",
            "load (bloomkv)",
            "compactions (bloomkv)",
            "present keys",
            "absent keys",
        ],
    );
}

#[test]
fn bench_stores_times_two_spendings_of_one_limit_on_the_same_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("one-tree.json");
    let run = kv(
        tmp.path(),
        &[
            "bench",
            "--stores",
            "bloomkv",
            "--keys",
            "20000",
            "--lookups",
            "2000",
            "--filter-memory-limit",
            "8KiB",
            "--spending-on-one-tree",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.out().contains("gets on the same tables reopened"),
        "{}",
        run.out()
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ours = &doc["stores"][0];
    let limit = figure(ours, "/filter_memory_limit_bytes");
    let tables = &ours["tables_per_level"];
    for (spending, limit) in [
        ("follows_lookups", limit),
        ("by_keys", limit),
        ("by_keys_at_given_limit", 8192.0),
    ] {
        let reopened = &ours["one_tree"][spending];
        // The limit the store ended with (or the one given), held, on the tables it left.
        assert_eq!(figure(reopened, "/filter_memory_limit_bytes"), limit);
        assert!(
            figure(reopened, "/filter_memory_bytes") <= limit,
            "{reopened:#}"
        );
        assert_eq!(&reopened["tables_per_level"], tables, "{reopened:#}");
        for kind in ["present", "absent"] {
            assert_eq!(figure(reopened, &format!("/{kind}/lookups")), 2000.0);
            assert!(figure(reopened, &format!("/{kind}/gets_per_second")) > 0.0);
        }
    }
}

/// The number at `pointer` in `doc`, or a failure naming it.
fn figure(doc: &Value, pointer: &str) -> f64 {
    doc.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer}: {doc:#}"))
}

#[test]
fn bench_writes_loads_then_writes_synced_and_reports_every_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let (json, chart) = (
        tmp.path().join("writes.json"),
        tmp.path().join("writes.svg"),
    );
    let run = run_on_terminal(&[
        "--db",
        tmp.path().to_str().unwrap(),
        "bench",
        "--stores",
        "bloomkv",
        "--writes",
        "--keys",
        "20000",
        "--synced-keys",
        "400",
        "--json",
        json.to_str().unwrap(),
        "--chart",
        chart.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert_on_terminal(
        &run,
        &[
            "bloomkv: running in a process of its own",
            "load, one put per write (bloomkv)",
            "compactions (bloomkv)",
            "synced writes, 1 thread (bloomkv)",
            "synced writes, 8 threads (bloomkv)",
        ],
    );
    assert!(
        run.stdout.starts_with("sustained writes: 20000 keys"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("\nsynced: 400 keys"), "{}", run.stdout);

    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["benchmark"], "writes");
    assert_eq!(doc["keys"], 20000);
    assert_eq!(doc["user_bytes"], 20000 * (16 + 100));
    assert_eq!(doc["writer_threads"], serde_json::json!([1, 8]));
    let stores = doc["stores"].as_array().unwrap();
    assert_eq!(stores.len(), 1);
    let ours = &stores[0];
    assert_eq!(ours["store"], "bloomkv", "{ours:#}");
    assert!(ours["failed"].is_null(), "{ours:#}");
    assert!(figure(ours, "/peak_resident_bytes") > 0.0);

    // Load: every key written, flushed, settled; the store wrote more than the user did.
    assert!(figure(ours, "/load/puts_per_second") > 0.0);
    assert!(figure(ours, "/load/load_puts_per_second") >= figure(ours, "/load/puts_per_second"));
    assert!(figure(ours, "/load/load_seconds") > 0.0);
    assert!(figure(ours, "/load/settle_seconds") >= 0.0);
    assert_eq!(ours["load"]["settle"], "wait_for_background_work");
    assert!(figure(ours, "/load/stall_seconds") >= 0.0);
    let amplification = figure(ours, "/load/write_amplification");
    assert!(
        amplification > 1.0 && amplification < 10.0,
        "write amplification {amplification}"
    );
    let counters = &ours["load"]["counters"];
    assert_eq!(counters["user_bytes_written"], 20000 * (16 + 100));
    assert!(figure(counters, "/wal_bytes_written") > figure(counters, "/user_bytes_written"));
    assert!(figure(counters, "/flushes") >= 1.0);
    // The kernel's count, where it keeps one, saw at least the WAL.
    if let Some(kernel) = ours["load"]["kernel_write_amplification"].as_f64() {
        assert!(kernel > 1.0, "kernel write amplification {kernel}");
    }
    assert!(figure(ours, "/load/bytes_on_disk") > 0.0);
    let timeline = ours["load"]["timeline"].as_array().unwrap();
    assert!(timeline.len() >= 2, "{timeline:?}");
    assert_eq!(timeline[0], serde_json::json!([0.0, 0]));
    assert_eq!(timeline.last().unwrap()[1], 20000, "{timeline:?}");

    // Synced: one fresh store per thread count, each key a synced write of its own.
    let synced = ours["synced"].as_array().unwrap();
    assert_eq!(synced.len(), 2, "{synced:?}");
    for (run, threads) in synced.iter().zip([1, 8]) {
        assert_eq!(run["threads"], threads);
        assert_eq!(run["keys"], 400);
        assert!(figure(run, "/puts_per_second") > 0.0);
        assert!(figure(run, "/p99_us") >= figure(run, "/p50_us"));
        let per_group = figure(run, "/batches_per_write_group");
        assert!(per_group >= 1.0 && per_group <= threads as f64, "{run:#}");
        assert_eq!(run["counters"]["grouped_batches"], 400);
    }
    assert_eq!(figure(&synced[0], "/batches_per_write_group"), 1.0);

    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains("<polyline"), "{svg}");
    assert!(svg.contains(">bloomkv</text>"), "{svg}");
    // The title names the workload and the memory (none held here), as a lookups chart's
    // does: charts of different runs tell themselves apart.
    assert!(
        svg.contains(
            ">puts/s during the load: 20000 keys, 100-byte compressible values, no memory \
             limit; one thread, one unsynced put per write<"
        ),
        "{svg}"
    );
    // The stores were throwaway: only the result files are left.
    let mut left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["writes.json", "writes.svg"]);
}

#[test]
fn bench_writes_records_a_store_that_fails_and_reports_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("writes.json");
    // The store refuses to open with so few files: its child fails.
    let run = kv(
        tmp.path(),
        &[
            "bench",
            "--stores",
            "bloomkv",
            "--writes",
            "--keys",
            "100",
            "--synced-keys",
            "8",
            "--max-open-files",
            "1",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let out = run.ok();
    assert!(
        run.stderr.contains("max_open_files must be at least 16"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("bloomkv: failed"), "{}", run.stderr);
    assert!(out.contains("bloomkv       failed: "), "{out}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["stores"][0]["store"], "bloomkv");
    assert!(doc["stores"][0]["failed"].is_string(), "{doc:#}");
}

#[test]
fn bench_writes_refuses_bad_arguments_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path();
    let writes = |extra: &[&str]| {
        let mut args = vec!["bench", "--stores", "bloomkv", "--writes"];
        args.extend_from_slice(extra);
        kv(db, &args)
    };
    kv(db, &["bench", "--writes"]).fails(2, "--writes compares stores: add --stores");
    kv(db, &["bench", "--stores", "bloomkv,nosuch", "--writes"]).fails(
        2,
        "unknown store 'nosuch' in --stores with --writes: use bloomkv, rocksdb, rocksdb-shape, fjall",
    );
    // rocksdb-shape compares writes only.
    kv(db, &["bench", "--stores", "rocksdb-shape"]).fails(
        2,
        "unknown store 'rocksdb-shape' in --stores: use bloomkv, rocksdb, rocksdb-partitioned, fjall",
    );
    writes(&["--keys", "0"]).fails(2, "at least one key");
    writes(&["--synced-keys", "5"]).fails(2, "--synced-keys 5 is fewer than the 8 threads");
    writes(&["--chart-from", "a.json"]).fails(2, "does not apply to --writes");
    writes(&["--writer-threads", "1,0"])
        .usage_error("invalid value '0' for '--writer-threads <THREADS>'");
    writes(&["--writer-threads", "x"])
        .usage_error("invalid value 'x' for '--writer-threads <THREADS>'");
    kv(db, &["bench", "--stores", "bloomkv", "--synced-keys", "10"]).usage_error("--writes");
    kv(db, &["bench", "--writer-threads", "2"]).usage_error("--writes");
    if !cfg!(feature = "peers") {
        kv(db, &["bench", "--stores", "bloomkv,rocksdb", "--writes"]).fails(
            2,
            "--stores rocksdb needs kvtool built with `--features peers`",
        );
    }
    // Nothing ran: no store was made.
    assert_eq!(std::fs::read_dir(db).unwrap().count(), 0);
}

#[test]
fn bench_ycsb_loads_then_runs_each_workload_and_reports_every_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let (json, chart) = (tmp.path().join("ycsb.json"), tmp.path().join("ycsb.svg"));
    // Asked out of order: they run in YCSB's, A before E.
    let run = run_on_terminal(&[
        "--db",
        tmp.path().to_str().unwrap(),
        "bench",
        "--ycsb",
        "e,A",
        "--records",
        "2000",
        "--operations",
        "2000",
        "--threads",
        "2",
        "--json",
        json.to_str().unwrap(),
        "--chart",
        chart.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert_on_terminal(
        &run,
        &[
            "bloomkv: running in a process of its own",
            "YCSB load (bloomkv)",
            "YCSB workload A (bloomkv)",
            "YCSB workload E (bloomkv)",
        ],
    );
    assert!(
        run.stdout.starts_with("YCSB core workloads: 2000 records"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("\nworkload A: "), "{}", run.stdout);

    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["benchmark"], "ycsb");
    assert_eq!(doc["workloads"], serde_json::json!(["A", "E"]));
    // YCSB's record of ten 100-byte fields, unless --value-size says otherwise.
    assert_eq!(doc["value_size"], 1000);
    assert_eq!(doc["threads"], 2);
    assert!(doc["memory_limit_bytes"].is_null());
    assert!(doc["commit"].is_string() || doc["commit"].is_null());
    let stores = doc["stores"].as_array().unwrap();
    assert_eq!(stores.len(), 1);
    let ours = &stores[0];
    assert_eq!(ours["store"], "bloomkv", "{ours:#}");
    assert!(figure(ours, "/load/ops_per_sec") > 0.0);
    assert_eq!(ours["load"]["operations"], 2000);
    assert_eq!(
        ours["load"]["settle"],
        "flush, then wait_for_background_work"
    );
    let workloads = ours["workloads"].as_array().unwrap();
    let letters: Vec<&str> = workloads
        .iter()
        .map(|w| w["workload"].as_str().unwrap())
        .collect();
    assert_eq!(letters, ["A", "E"]);
    for w in workloads {
        assert!(figure(w, "/ops_per_sec") > 0.0, "{w:#}");
        assert_eq!(w["operations"], 2000);
        assert_eq!(w["threads"], 2);
        assert_eq!(w["records"], 2000);
        assert_eq!(w["value_size"], 1000);
        assert!(figure(w, "/p999_us") >= figure(w, "/p99_us"));
        assert!(figure(w, "/p99_us") >= figure(w, "/p50_us"));
        assert!(figure(w, "/p50_us") > 0.0);
        let counted: u64 = w["by_operation"]
            .as_object()
            .unwrap()
            .values()
            .map(|o| o["count"].as_u64().unwrap())
            .sum();
        assert_eq!(counted, 2000, "{w:#}");
    }
    let (a, e) = (&workloads[0], &workloads[1]);
    // A reads and updates loaded records: every read finds its record, whole.
    assert_eq!(a["not_found"], 0, "{a:#}");
    assert_eq!(a["request_distribution"], "zipfian");
    let reads = figure(a, "/by_operation/read/count");
    assert!(reads > 800.0 && reads < 1200.0, "{a:#}");
    assert_eq!(figure(a, "/bytes_read"), reads * 1000.0);
    // E scans and inserts past the loaded records.
    let inserts = figure(e, "/by_operation/insert/count");
    assert!(inserts > 0.0 && inserts < 300.0, "{e:#}");
    assert_eq!(e["records_at_start"], 2000);
    assert_eq!(figure(e, "/records_at_end"), 2000.0 + inserts);
    let scans = figure(e, "/by_operation/scan/count");
    let per_scan = figure(e, "/scanned_records") / scans;
    assert!(per_scan > 30.0 && per_scan <= 100.0, "{per_scan}");
    // What bloomkv did meanwhile: A's reads of a settled store read data blocks; its level 0
    // is counted at both ends.
    let background = &a["store_counters"];
    assert!(figure(background, "/data_block_reads") > 0.0, "{a:#}");
    assert!(background["level0_tables_at_start"].is_u64(), "{a:#}");
    assert!(background["compaction_bytes_written"].is_u64(), "{a:#}");
    assert!(run.stdout.contains("bloomkv meanwhile: "), "{}", run.stdout);

    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    // A bar each for the load, A and E.
    assert_eq!(svg.matches("<rect x=").count(), 3, "{svg}");
    // The stores were throwaway: only the result files are left.
    let mut left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["ycsb.json", "ycsb.svg"]);
}

#[test]
fn bench_ycsb_refuses_bad_arguments_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path();
    kv(db, &["bench", "--ycsb", "A,G"]).usage_error("none of YCSB's core workloads");
    kv(db, &["bench", "--ycsb", "A", "--writes"]).usage_error("cannot be used with");
    kv(db, &["bench", "--records", "10"]).usage_error("--ycsb");
    kv(db, &["bench", "--ycsb", "A", "--zipf-constant", "1"])
        .usage_error("not a Zipfian constant between 0 and 1");
    kv(db, &["bench", "--ycsb", "A", "--threads", "0"]).usage_error("--threads");
    kv(
        db,
        &["bench", "--ycsb", "A", "--stores", "bloomkv,rocksdb-shape"],
    )
    .fails(
        2,
        "unknown store 'rocksdb-shape' in --stores with --ycsb: use bloomkv, rocksdb, fjall",
    );
    if !cfg!(feature = "peers") {
        kv(db, &["bench", "--ycsb", "A", "--stores", "rocksdb"]).fails(
            2,
            "--stores rocksdb needs kvtool built with `--features peers`",
        );
    }
    // Nothing ran: no store was made.
    assert_eq!(std::fs::read_dir(db).unwrap().count(), 0);
}

/// A file of the repository (this crate lives in its `kvtool/`).
fn repo_path(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The text of a file of the repository.
fn repo_file(path: &str) -> String {
    std::fs::read_to_string(repo_path(path)).expect(path)
}

/// The README's section on kvtool.
fn readme_kvtool_section() -> String {
    let readme = repo_file("README.md");
    let start = readme.find("\n## kvtool\n").expect("a kvtool section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |at| at + 3);
    rest[..end].to_string()
}

/// Every `kvtool ...` command in `text`: code lines and backquoted examples, with pipes,
/// redirections and comments cut off.
fn kvtool_commands(text: &str) -> Vec<Vec<String>> {
    let code_lines = text.lines().filter_map(|l| l.strip_prefix("    "));
    let quoted = text.split('`').skip(1).step_by(2);
    code_lines
        .chain(quoted)
        .flat_map(|line| line.split('#').next().unwrap().split('|'))
        .filter_map(|part| part.trim().strip_prefix("kvtool "))
        .filter(|args| !args.contains("COMMAND"))
        .map(|args| {
            let args = args.split('>').next().unwrap();
            args.split_whitespace().map(str::to_string).collect()
        })
        .collect()
}

/// Runs `kvtool ARGS --help` for each command: each must be one kvtool accepts.
fn assert_each_parses(commands: Vec<Vec<String>>) {
    for mut args in commands {
        args.push("--help".to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let help = run_with(&args, None);
        assert!(
            help.code == 0 && help.out().contains("Usage: kvtool "),
            "kvtool {args:?}: {}",
            help.stderr
        );
    }
}

#[test]
fn the_manual_and_the_readme_say_how_to_install_kvtool_and_their_examples_parse() {
    let manual = repo_file("docs/kvtool.md");
    let readme = readme_kvtool_section();
    // `kvtool` in the examples is a command on the PATH: both must say how it gets there.
    for text in [&manual, &readme] {
        assert!(
            text.contains("\n    cargo install --path kvtool\n"),
            "{text}"
        );
        assert!(text.contains("target/release/kvtool "), "{text}");
    }
    let in_manual = kvtool_commands(&manual);
    assert!(in_manual.len() >= 15, "{in_manual:?}");
    assert_each_parses(in_manual);
    let in_readme = kvtool_commands(&readme);
    assert!(in_readme.len() >= 8, "{in_readme:?}");
    assert_each_parses(in_readme);
}

#[test]
fn dump_into_a_closed_pipe_is_not_an_error() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(5000).as_bytes()).ok();
    // More output than a pipe buffers: the writes after the reader leaves fail with EPIPE.
    let mut child = Command::new(KVTOOL)
        .args(["--db", db.to_str().unwrap(), "dump"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
}

/// Every file of the store and its bytes.
fn store_bytes(db: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(db)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn read_commands_change_no_byte_and_do_not_need_the_lock_file() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(2_000).as_bytes()).ok();
    // A write left in the WAL: only a replay in memory shows it.
    let options = bloomkv::Options::default().create_if_missing(false);
    let open = bloomkv::Db::open(&db, options).unwrap();
    open.put(b"in-the-log", b"yes").unwrap();
    drop(open);
    std::fs::remove_file(db.join("LOCK")).unwrap();
    let before = store_bytes(&db);
    assert_eq!(kv(&db, &["get", "in-the-log"]).ok(), "yes\n");
    assert_eq!(
        kv(&db, &["get", "key000007"]).ok(),
        "value-000007-vvvvvvv\n"
    );
    assert_eq!(kv(&db, &["scan", "--keys-only"]).lines().len(), 2_001);
    assert_eq!(kv(&db, &["dump"]).lines().len(), 2_001);
    kv(&db, &["stats", "--json"]).ok();
    assert_eq!(store_bytes(&db), before, "a read command wrote");
    // Read commands take no filter option: they write no table.
    kv(&db, &["get", "--no-filter", "k"]).usage_error("--no-filter");
}

#[test]
fn read_commands_refuse_a_store_a_writer_has_open() {
    let (_tmp, db) = store();
    kv(&db, &["put", "k", "v"]).ok();
    let open = bloomkv::Db::open(&db, bloomkv::Options::default()).unwrap();
    for args in [
        &["get", "k"][..],
        &["scan"],
        &["dump"],
        &["stats"],
        &["check"],
    ] {
        kv(&db, args).fails(2, "already open");
    }
    drop(open);
    assert_eq!(kv(&db, &["get", "k"]).ok(), "v\n");
}

#[test]
fn check_lists_stray_files_as_unreferenced_not_damaged() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(500).as_bytes()).ok();
    let stray = db.join("009999.sst");
    std::fs::write(&stray, vec![0x5a; 4_000]).unwrap();
    let out = kv(&db, &["check"]).ok();
    assert!(out.ends_with("OK\n"), "{out}");
    assert!(
        out.contains(&format!("unreferenced: {}", stray.display())),
        "{out}"
    );
}

#[test]
fn compact_leaves_one_level_even_for_a_large_store() {
    let (_tmp, db) = store();
    // Enough data for several levels: 40 MiB of pairs.
    let pairs: String = (0..200_000)
        .map(|i| format!("key{i:08}\t{:0>200}\n", i))
        .collect();
    kv_stdin(&db, &["load"], pairs.as_bytes()).ok();
    kv(&db, &["--filter-fpr", "0.2", "compact"]).ok();
    let stats = stats_json(&db);
    let levels: Vec<&Value> = stats["levels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["tables"].as_u64().unwrap() > 0)
        .collect();
    assert_eq!(levels.len(), 1, "{stats}");
    for t in stats["tables"].as_array().unwrap() {
        assert!(t["bits_per_key"].as_u64().unwrap() < 5, "{t}");
    }
    assert_eq!(stats["totals"]["entries"], 200_000);
}

/// Overwrites `len` bytes at `offset` of `path` with `byte`.
fn damage(path: &Path, offset: usize, len: usize, byte: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset..offset + len].fill(byte);
    std::fs::write(path, bytes).unwrap();
}

/// A store whose WAL holds 300 synced writes, one damaged record in the middle.
fn store_with_a_damaged_wal() -> (tempfile::TempDir, PathBuf) {
    let (tmp, db) = store();
    kv(&db, &["put", "first", "1"]).ok();
    let open = bloomkv::Db::open(&db, bloomkv::Options::default()).unwrap();
    for i in 0..300 {
        let mut batch = bloomkv::WriteBatch::new();
        batch.put(format!("w{i:04}"), "x".repeat(100));
        open.write_opt(batch, &bloomkv::WriteOptions::synced())
            .unwrap();
    }
    drop(open);
    let log = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    damage(&log, 10_000, 50, 0xee);
    (tmp, db)
}

#[test]
fn wal_recovery_modes_and_repair_open_a_store_with_a_damaged_wal() {
    let (_tmp, db) = store_with_a_damaged_wal();
    let damaged = kv(&db, &["get", "first"]).fails(2, "corruption");
    assert!(
        damaged.contains("--wal-recovery salvage") && damaged.contains("repair"),
        "{damaged}"
    );
    kv(&db, &["get", "--wal-recovery", "strict", "first"]).fails(2, "corruption");
    // point-in-time keeps what comes before the damage, salvage every intact record.
    assert_eq!(
        kv(&db, &["get", "--wal-recovery", "point-in-time", "w0001"]).ok(),
        format!("{}\n", "x".repeat(100))
    );
    let missing = kv(&db, &["get", "--wal-recovery", "point-in-time", "w0299"]);
    missing.fails(1, "no such key");
    // Whatever the command, opening says on stderr what recovery left out of the WAL.
    assert!(
        missing.stderr.starts_with("note: recovery dropped ") && missing.stderr.contains("lost"),
        "{}",
        missing.stderr
    );
    assert_eq!(
        kv(&db, &["get", "--wal-recovery", "salvage", "w0299"]).ok(),
        format!("{}\n", "x".repeat(100))
    );
    kv(&db, &["get", "--wal-recovery", "everything", "w0299"]).usage_error("everything");

    let out = kv(&db, &["repair"]).ok();
    assert!(out.contains("dropped"), "{out}");
    assert!(
        out.ends_with("the store opens again and check finds no damage\n"),
        "{out}"
    );
    assert_eq!(kv(&db, &["get", "first"]).ok(), "1\n");
    assert_eq!(
        kv(&db, &["get", "w0299"]).ok(),
        format!("{}\n", "x".repeat(100))
    );
    let kept = kv(&db, &["scan", "--keys-only", "--prefix", "w"])
        .lines()
        .len();
    assert!((290..300).contains(&kept), "{kept} of 300 kept");
    assert!(kv(&db, &["check"]).ok().ends_with("OK\n"));
}

#[test]
fn repair_restores_a_lost_current() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(1_000).as_bytes()).ok();
    std::fs::remove_file(db.join("CURRENT")).unwrap();
    kv(&db, &["put", "k", "v"]).fails(2, "no CURRENT");
    let out = kv(&db, &["repair"]).ok();
    assert!(
        out.contains("restored CURRENT: it names MANIFEST-"),
        "{out}"
    );
    assert_eq!(kv(&db, &["scan", "--keys-only"]).lines().len(), 1_000);
}

#[test]
fn check_counts_the_logs_it_read_and_names_their_damage() {
    let (_tmp, db) = store_with_a_damaged_wal();
    let run = kv(&db, &["check"]);
    let error = run.fails(2, "damaged file");
    assert!(error.contains(".log"), "{error}");
    let out = run.out();
    assert!(
        out.contains("and 1 log (") && out.contains("1 of them damaged"),
        "{out}"
    );
    assert!(
        out.contains("damage: corruption in ") && out.contains(".log"),
        "{out}"
    );
    // What a salvaging read keeps of the damaged log is counted: most of its 300 records.
    let intact: u64 = out
        .split("1 log (")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no record count in {out}"));
    assert!(
        (250..=300).contains(&intact),
        "{intact} intact records: {out}"
    );
}

/// A damaged data block met by a read, after the open, comes with what to run; `repair` then
/// keeps every other key, says what it lost, and `check` is clean.
#[test]
fn a_damaged_data_block_points_to_check_and_repair() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(2_000).as_bytes()).ok();
    let table = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    // The first data block starts at offset 0 and holds the first keys.
    damage(&table, 30, 4, 0x5a);
    let error = kv(&db, &["get", "key000000"]).fails(2, "corruption");
    assert!(
        error.contains("check") && error.contains("repair"),
        "{error}"
    );
    let out = kv(&db, &["repair"]).ok();
    assert!(
        out.contains("damaged table") && out.contains("lost/"),
        "{out}"
    );
    assert!(out.ends_with("check finds no damage\n"), "{out}");
    let kept = kv(&db, &["scan", "--keys-only"]).lines().len();
    assert!((1_800..2_000).contains(&kept), "{kept} of 2,000 kept");
    assert_eq!(
        kv(&db, &["get", "key001999"]).ok(),
        format!("value-001999-{}\n", "v".repeat(1999 % 40))
    );
    assert!(kv(&db, &["check"]).ok().ends_with("OK\n"));
}

/// Messages that say what is wrong with what was given, each as a user met it.
#[test]
fn messages_name_what_was_given() {
    let (tmp, db) = store();
    // --db naming a file.
    let file = tmp.path().join("data.tsv");
    std::fs::write(&file, "k\tv\n").unwrap();
    let error = kv(&file, &["get", "k"]).fails(2, "no bloomkv store");
    assert!(error.contains("it is a file"), "{error}");
    let error = kv(&file, &["repair"]).fails(2, "no bloomkv store");
    assert!(error.contains("it is a file"), "{error}");

    kv_stdin(&db, &["load"], numbered_pairs(100).as_bytes()).ok();
    // sst given the store's directory, or a manifest.
    let error = run_with(&["sst", db.to_str().unwrap()], None).fails(2, "is a directory");
    assert!(error.contains("one table file"), "{error}");
    let manifest = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    let error = run_with(&["sst", manifest.to_str().unwrap()], None).fails(2, "not a table");
    assert!(error.contains("manifest"), "{error}");

    // A bad escape is shown as typed.
    let error = kv(&db, &["get", "a\\xZZ"]).fails(2, "bad escape");
    assert!(error.contains("'a\\xZZ'"), "{error}");

    // --settings names every form it takes.
    let error = kv(&db, &["bench", "--keys", "1000", "--settings", "foo"]).fails(2, "foo");
    assert!(
        error.contains("budget:") && error.contains("reads:"),
        "{error}"
    );

    // compact says what it did.
    let out = kv(&db, &["compact"]).ok();
    assert!(
        out.starts_with("compacted: 1 table holding 100 entries"),
        "{out}"
    );

    // Defaults print as they are typed.
    let help = run_with(&["help", "bench"], None).ok();
    assert!(help.contains("[default: 1,8]"), "{help}");

    // repair on an empty directory leaves nothing behind.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    kv(&empty, &["repair"]).fails(2, "no bloomkv store to repair");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// `stats` shows the bits per key a level's tables have, not a target of the options the
/// command happened to open with, and heads its counters with what they cover.
#[test]
fn stats_shows_the_bits_tables_have_and_what_each_count_covers() {
    let (_tmp, db) = store();
    kv_stdin(&db, &["load"], numbered_pairs(1_000).as_bytes()).ok();
    kv(&db, &["--filter-fpr", "0.001", "compact"]).ok();
    let stats = stats_json(&db);
    let table = &stats["tables"][0];
    let bits = table["bits_per_key"].as_u64().unwrap();
    assert!(bits > 10, "{table}");
    let level = table["level"].as_u64().unwrap();
    let text = kv(&db, &["stats"]).ok();
    let row = text
        .lines()
        .find(|l| l.starts_with(&format!("L{level} ")))
        .unwrap_or_else(|| panic!("no row for level {level} in\n{text}"));
    // The level's kind, the bits per key its filters hold (a Ribbon filter spends the bits
    // the policy gives a Bloom filter), then its predicted and measured rates.
    let cells: Vec<&str> = row.split_whitespace().collect();
    let at = cells
        .iter()
        .position(|c| *c == "ribbon")
        .unwrap_or_else(|| panic!("{row}"));
    let held: f64 = cells[at + 1].parse().unwrap_or_else(|_| panic!("{row}"));
    assert!((held - bits as f64).abs() < 0.6, "{row}");
    let predicted: f64 = cells[at + 2].parse().unwrap_or_else(|_| panic!("{row}"));
    assert!(predicted > 0.0 && predicted < 0.001, "{row}");
    assert!(!text.contains("off target"), "{text}");
    // The store remembers the filter it was compacted with: a later write without
    // --filter-fpr keeps it, and stats names it.
    assert!(
        text.contains("filter policy") && text.contains("rate 0.001"),
        "{text}"
    );
    kv(&db, &["put", "later", "v"]).ok();
    let stats = stats_json(&db);
    assert_eq!(stats["filter_policy"], "rate 0.001");
    let tables = stats["tables"].as_array().unwrap();
    let newest = tables.iter().max_by_key(|t| t["number"].as_u64()).unwrap();
    assert_eq!(newest["bits_per_key"].as_u64(), Some(bits), "{newest}");
    let headings: Vec<&str> = text.lines().filter(|l| l.ends_with(':')).collect();
    assert_eq!(
        headings,
        [
            "over the store's life:",
            "since this open:",
            "now:",
            "memory by role, bytes:"
        ]
    );
    // One row per role, each with its use and target.
    let memory = text.split("memory by role, bytes:").nth(1).unwrap();
    for role in ["memtables", "block cache", "index partitions", "filters"] {
        let row = (memory.lines())
            .find(|l| l.trim_start().starts_with(role))
            .unwrap_or_else(|| panic!("no row for {role} in\n{memory}"));
        assert!(row.contains(" of a target of "), "{row}");
    }
    let roles = stats["memory"].as_array().unwrap();
    assert_eq!(roles.len(), 4, "{roles:?}");
    assert_eq!(roles[0]["role"], "memtables");
    assert!(roles[0]["given_bytes"].as_u64().unwrap() > 0, "{roles:?}");
    let life = text.split("over the store's life:").nth(1).unwrap();
    let life = life.split("since this open:").next().unwrap();
    assert!(
        life.contains("compactions") && life.contains("write amplification"),
        "{life}"
    );
}

#[test]
fn bench_aligns_long_setting_names_and_says_what_its_figures_mean() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().to_str().unwrap();
    let mut args = vec!["--db", db];
    args.extend(small_bench(&[
        "--settings",
        "none,0.01,budget:10,reads:0.0001",
    ]));
    let out = run_with(&args, None).ok();
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("absent keys (warm); I/O avoided"))
        .skip(1)
        .take(5)
        .collect();
    let header = table[0];
    assert!(header.starts_with("  setting"), "{out}");
    // Each row's figures start in the column its header names.
    let bits_at = header.find("bits/key").unwrap() + "bits/key".len();
    for (row, name) in table[1..]
        .iter()
        .zip(["none", "0.01", "budget:10", "reads:0.0001"])
    {
        assert!(row.trim_start().starts_with(name), "{row}");
        let bits_end = row[..bits_at].trim_end().len();
        assert_eq!(bits_end, bits_at, "misaligned:\n{header}\n{row}");
    }
    // A budget's row shows the bits per key its filters hold, not a dash.
    let budget = table[3].split_whitespace().nth(1).unwrap();
    let bits: f64 = budget.parse().unwrap_or_else(|_| panic!("{}", table[3]));
    assert!((5.0..=15.0).contains(&bits), "{bits}");
    assert!(out.contains("\nlegend (lower is better"), "{out}");
    let verdicts: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("verdict"))
        .skip(1)
        .collect();
    assert_eq!(verdicts.len(), 4, "{out}");
    assert!(verdicts[0].contains("no filters"), "{}", verdicts[0]);
    for line in &verdicts[1..] {
        assert!(line.contains("% of the block reads avoided"), "{line}");
        assert!(line.contains("the gets/s of none"), "{line}");
    }
}

#[test]
fn a_lookups_chart_names_the_workload_and_the_memory_limit_in_its_title() {
    let tmp = tempfile::tempdir().unwrap();
    let chart = tmp.path().join("chart.svg");
    let recorded = repo_path("docs/results/benchmarks-100m-1gib-random-5c1f4d4.json");
    run_with(
        &[
            "bench",
            "--chart",
            chart.to_str().unwrap(),
            "--chart-from",
            recorded.to_str().unwrap(),
        ],
        None,
    )
    .ok();
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(
        svg.contains(">100000000 keys, 100-byte random values, held to 1024 MiB (each store"),
        "{svg}"
    );
}

/// `--chart-from` draws a `--writes` run's JSON as its chart of puts per second, refuses to
/// mix one with runs of lookups, and refuses a file that is no run of stores.
#[test]
fn chart_from_draws_a_writes_run_and_refuses_what_it_cannot_draw() {
    let tmp = tempfile::tempdir().unwrap();
    let chart = tmp.path().join("chart.svg");
    let chart_arg = chart.to_str().unwrap();
    let writes = repo_path("docs/results/benchmarks-writes-30m-1gib.json");
    let lookups = repo_path("docs/results/benchmarks-100m-1gib-random-5c1f4d4.json");
    let (writes, lookups) = (writes.to_str().unwrap(), lookups.to_str().unwrap());
    run_with(
        &["bench", "--chart", chart_arg, "--chart-from", writes],
        None,
    )
    .ok();
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.contains("puts/s"), "{svg}");
    assert!(!svg.contains("1e308"), "{svg}");
    // --variant names what the run tried in the title.
    let args = [
        "bench",
        "--chart",
        chart_arg,
        "--chart-from",
        writes,
        "--variant",
        "arena",
    ];
    run_with(&args, None).ok();
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.contains("held to 1024 MiB; arena; one thread"), "{svg}");
    let both = format!("{writes},{lookups}");
    run_with(
        &["bench", "--chart", chart_arg, "--chart-from", &both],
        None,
    )
    .fails(
        2,
        "one --writes run alone; 1 of these 2 files are --writes runs",
    );
    let settings = tmp.path().join("settings.json");
    std::fs::write(&settings, r#"{"settings": []}"#).unwrap();
    let settings = settings.to_str().unwrap();
    run_with(
        &["bench", "--chart", chart_arg, "--chart-from", settings],
        None,
    )
    .fails(2, "is not the JSON of a --stores run: no stores");
}

#[test]
fn a_prefix_extractor_given_by_name_lets_scans_and_stats_use_the_prefix_filters() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s");
    let lines: String = (0..200)
        .map(|i| format!("t{:02}:{i:04}\tv\n", (i % 10) * 2))
        .collect();
    kv_stdin(
        &db,
        &["load", "--prefix-extractor", "delimited:0x3a"],
        lines.as_bytes(),
    )
    .ok();
    // Opened with the extractor the tables name: the filters are read and asked.
    let stats = kv(
        &db,
        &["stats", "--prefix-extractor", "delimited:0x3a", "--json"],
    )
    .ok();
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["prefix_extractor"], "delimited:0x3a");
    assert_eq!(stats["tables_prefix_filter_ignored"], 0);
    assert!(stats["prefix_filter_memory_bytes"].as_u64().unwrap() > 0);
    let scan = kv(
        &db,
        &[
            "scan",
            "--prefix-extractor",
            "delimited:0x3a",
            "--prefix",
            "t04:",
        ],
    )
    .ok();
    assert_eq!(scan.lines().count(), 20);
    assert!(kv(&db, &["scan", "--prefix", "t05:"]).ok().is_empty());
    // Without it, the same answers, the filters left unread.
    let stats = kv(&db, &["stats", "--json"]).ok();
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["tables_prefix_filter_ignored"], 1);
    let plain = kv(&db, &["scan", "--prefix", "t04:"]).ok();
    assert_eq!(plain, scan);
    // A name no built-in extractor has is a usage error.
    kv(&db, &["scan", "--prefix-extractor", "custom:x"])
        .usage_error("invalid value 'custom:x' for '--prefix-extractor <NAME>'");
}
