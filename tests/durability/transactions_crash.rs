//! A transaction across two keyspaces survives SIGKILL whole or not at all: a child moves
//! units between an account's balance in one keyspace and its balance in the other, one
//! transaction a move, and counts its commits in a third key of the same transactions; it is
//! killed at a random moment, again and again. After each kill the store opens with every
//! account's two balances adding up to what they started at (no half of a move), and with at
//! least as many commits as the child was told of.

use crate::common;

use std::time::Duration;

use bloomkv::{Db, Error, Keyspace, KeyspaceOptions, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CHILD_ENV: &str = "BLOOMKV_TRANSACTIONS_CRASH_DIR";
const ACCOUNTS: u64 = 20;
const START: u64 = 1_000;
const KILLS: u64 = 8;

fn number(value: Option<Vec<u8>>) -> u64 {
    value.map_or(0, |v| u64::from_le_bytes(v.try_into().expect("8 bytes")))
}

fn account(a: u64) -> String {
    format!("account-{a:02}")
}

/// The two keyspaces, made with their starting balances in one batch the first time.
fn open_accounts(db: &Db) -> (Keyspace, Keyspace) {
    let left = db.keyspace("left", KeyspaceOptions::new()).unwrap();
    let right = db.keyspace("right", KeyspaceOptions::new()).unwrap();
    if db.get("started").unwrap().is_none() {
        let mut batch = WriteBatch::new();
        for a in 0..ACCOUNTS {
            batch.put_in(&left, account(a), START.to_le_bytes());
            batch.put_in(&right, account(a), 0u64.to_le_bytes());
        }
        batch.put("started", "yes");
        db.write_opt(batch, &WriteOptions::synced()).unwrap();
    }
    (left, right)
}

/// Runs only as the child: moves units until killed, printing the commit count after each.
#[test]
fn transactions_crash_child_mover() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, common::small_tree_options()).expect("child open");
    let (left, right) = open_accounts(&db);
    let mut rng = SmallRng::seed_from_u64(number(db.get("commits").unwrap()));
    loop {
        if rng.gen_range(0..200) == 0 {
            db.flush().expect("child flush");
        }
        let a = account(rng.gen_range(0..ACCOUNTS));
        let mut tx = db.transaction();
        let (from, to) = match rng.gen_bool(0.5) {
            true => (&left, &right),
            false => (&right, &left),
        };
        let have = number(tx.get_in(from, &a).unwrap());
        let moved = rng.gen_range(0..=have.min(7));
        let there = number(tx.get_in(to, &a).unwrap());
        tx.put_in(from, &a, (have - moved).to_le_bytes()).unwrap();
        tx.put_in(to, &a, (there + moved).to_le_bytes()).unwrap();
        let commits = number(tx.get("commits").unwrap()) + 1;
        tx.put("commits", commits.to_le_bytes()).unwrap();
        let options = WriteOptions::default().sync(rng.gen_bool(0.2));
        match tx.commit_opt(&options) {
            Ok(()) => println!("{commits}"),
            Err(Error::Conflict { .. }) => unreachable!("one writer"),
            Err(e) => panic!("child commit: {e}"),
        }
    }
}

#[test]
fn a_transaction_across_keyspaces_is_whole_or_absent_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(56);
    let mut told = 0;
    for kill in 0..KILLS {
        let after = Duration::from_millis(rng.gen_range(150..400));
        let last = common::run_child_and_kill(
            &common::test_name(module_path!(), "transactions_crash_child_mover"),
            CHILD_ENV,
            dir.path(),
            after,
        );
        told = told.max(last.unwrap_or(0));
        let db = Db::open(dir.path(), common::small_tree_options())
            .unwrap_or_else(|e| panic!("kill {kill}: reopen: {e}"));
        let (left, right) = open_accounts(&db);
        for a in 0..ACCOUNTS {
            let l = number(left.get(account(a)).unwrap());
            let r = number(right.get(account(a)).unwrap());
            assert_eq!(l + r, START, "kill {kill}: account {a} holds {l} + {r}");
        }
        let commits = number(db.get("commits").unwrap());
        assert!(
            commits >= told,
            "kill {kill}: {commits} commits in the store, {told} acknowledged"
        );
    }
    assert!(told > 0, "the child never committed");
}
