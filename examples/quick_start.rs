use bloomkv::{Db, FilterPolicy, Options, WriteBatch, WriteOptions};

fn main() -> bloomkv::Result<()> {
    let options = Options::default().filter_policy(FilterPolicy::FalsePositiveRate(0.01));
    let db = Db::open("/tmp/my-store", options)?;
    db.put(b"apple", b"red")?;
    let mut batch = WriteBatch::new();
    batch.put(b"banana", b"yellow").delete(b"apple");
    db.write_opt(batch, &WriteOptions::synced())?; // atomic; durable when it returns
    assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
    for pair in db.prefix(b"ban") {
        let (key, value) = pair?;
        println!("{key:?} = {value:?}");
    }
    let snapshot = db.snapshot(); // reads through it see the store as it is now
    db.put(b"banana", b"green")?;
    assert_eq!(snapshot.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
    let values = db.multi_get(&[b"banana", b"cherry"])?; // one read state, filters first
    assert_eq!(values, vec![Some(b"green".to_vec()), None]);
    assert!(!db.may_contain(b"cherry")); // memtables and filters only: false is surely absent
    drop(snapshot);
    let stats = db.stats(); // filter probes, reads avoided, data-block reads, tables per level
    println!("{} reads avoided by filters", stats.filter_negatives);
    Ok(())
}
