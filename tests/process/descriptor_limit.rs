//! A store under a file descriptor limit lower than its table count and its `max_open_files`:
//! the table cache is sized to what the limit leaves, and an open that runs out of
//! descriptors has the cache close files and tries again. The test lowers the limit of its
//! whole process, so it holds the process to itself.

use crate::common;

use bloomkv::{Db, Options};

/// The process's soft limit on open files, and its hard limit.
fn descriptor_limits() -> (libc::rlim_t, libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    (limit.rlim_cur, limit.rlim_max)
}

fn set_soft_descriptor_limit(soft: libc::rlim_t) {
    let (_, hard) = descriptor_limits();
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads the struct it is given.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}

fn options() -> Options {
    common::small_tree_options()
}

#[test]
fn a_store_of_35_tables_works_with_23_descriptors() {
    let _alone = crate::whole_process();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut written = 0u64;
    {
        let db = Db::open(&path, options()).unwrap();
        while db.stats().levels.iter().map(|l| l.tables).sum::<usize>() < 35 {
            for _ in 0..500 {
                db.put(common::key(written), common::value(written, 0))
                    .unwrap();
                written += 1;
            }
            db.flush().unwrap();
            db.wait_for_background_work().unwrap();
        }
        db.close().unwrap();
    }
    let (soft_before, _) = descriptor_limits();
    set_soft_descriptor_limit(23);
    let outcome = std::panic::catch_unwind(|| {
        let db = Db::open(&path, options()).unwrap();
        let tables: usize = db.stats().levels.iter().map(|l| l.tables).sum();
        assert!(tables >= 35, "{tables} tables");
        assert!(db.stats().table_cache.capacity < 23);
        for i in 0..written {
            assert_eq!(
                db.get(common::key(i)).unwrap(),
                Some(common::value(i, 0)),
                "key {i}"
            );
        }
        // Writes that flush and compact, then a full compaction, and everything reads back.
        for i in 0..written {
            db.put(common::key(i), common::value(i, 1)).unwrap();
        }
        db.compact().unwrap();
        for i in (0..written).step_by(7) {
            assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 1)));
        }
        assert_eq!(db.iter().count() as u64, written);
        assert_eq!(db.stats().background_error, None);
        db.close().unwrap();
    });
    set_soft_descriptor_limit(soft_before);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
