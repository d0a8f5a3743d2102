//! The commands that look after a store as a whole: `check` reads every checksum, `compact`
//! rewrites every table into one level (how a store's filter is changed), and `repair` makes
//! a damaged store open again and says what it dropped.

use std::path::Path;
use std::sync::Arc;

use bloomkv::fs::OsFileSystem;

use super::open::{
    describe_dropped, no_store, open_to_write, require_store, store_dir, tool_options,
};
use super::output::{counted, emit};
use crate::cli::{OpenFlags, StoreDir, TableFilter};
use crate::Failure;

pub(super) fn check(dir: &Path) -> Result<(), Failure> {
    // First whether there is a store at all, so that a missing directory or CURRENT reads as
    // "no store" rather than as damage or an I/O error.
    require_store(dir)?;
    let report = bloomkv::check::check_store_with(Arc::new(OsFileSystem), dir)?;
    let mut out = String::new();
    for (path, offset, bytes) in &report.torn_tails {
        out += &format!(
            "note: {} ends in a torn record at offset {offset} ({bytes} bytes)\n",
            path.display()
        );
    }
    let damaged_logs = match report.damaged_logs {
        0 => String::new(),
        n => format!(", {n} of them damaged"),
    };
    out += &format!(
        "checked {} ({}) and {} ({}{damaged_logs})\n",
        counted(report.tables_ok as u64, "table", "tables"),
        counted(report.table_entries, "entry", "entries"),
        counted(report.logs as u64, "log", "logs"),
        counted(report.log_records, "intact record", "intact records"),
    );
    for path in &report.unreferenced {
        out += &format!(
            "unreferenced: {} (the store does not use it)\n",
            path.display()
        );
    }
    if report.is_clean() {
        out += "OK\n";
        return emit(&out);
    }
    for problem in &report.problems {
        out += &format!("damage: {problem}\n");
    }
    emit(&out)?;
    Err(Failure::from(format!(
        "{}; first: {}",
        counted(
            report.problems.len() as u64,
            "damaged file",
            "damaged files"
        ),
        report.problems[0]
    )))
}

/// `compact`: rewrites every table with the filter asked for, and says what the store holds.
pub(super) fn compact(
    store: &StoreDir,
    filter: &TableFilter,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let db = open_to_write(store_dir(store)?, filter, opening, false)?;
    db.compact()?;
    let stats = db.stats();
    let tables: usize = stats.levels.iter().map(|l| l.tables).sum();
    let entries: u64 = stats.levels.iter().map(|l| l.entries).sum();
    db.close()?;
    emit(&format!(
        "compacted: {} holding {}\n",
        counted(tables as u64, "table", "tables"),
        counted(entries, "entry", "entries")
    ))
}

pub(super) fn repair(dir: &Path) -> Result<(), Failure> {
    require_store_files(dir)?;
    let report = bloomkv::repair(dir, tool_options())?;
    let mut text = String::new();
    for (name, why) in &report.unusable_manifests {
        text += &format!("passed over {name}: {why}\n");
    }
    if let Some(name) = &report.restored_current {
        text += &format!("restored CURRENT: it names {name}\n");
    }
    let recovery = &report.recovery;
    text += &format!(
        "kept {} from the WAL\n",
        counted(recovery.batches_replayed, "write batch", "write batches")
    );
    for dropped in &recovery.dropped {
        text += &format!("{}\n", describe_dropped(dropped));
    }
    for table in &report.salvaged {
        text += &format!(
            "damaged table {} (level {}): {}\n  kept {} and {}, dropped {} and {}; {}; the damaged file is now {}\n",
            table.file,
            table.level,
            table.damage,
            counted(table.blocks_kept, "block", "blocks"),
            counted(table.entries_kept, "entry", "entries"),
            counted(table.blocks_dropped, "block", "blocks"),
            counted(table.entries_lost, "entry", "entries"),
            match &table.replaced_by {
                Some(name) => format!("what was kept is in {name}"),
                None => "nothing of it was kept".to_string(),
            },
            table.moved_to.display(),
        );
    }
    if !report.salvaged.is_empty() {
        text += &format!(
            "lost {} of damaged tables\n",
            counted(report.table_entries_lost(), "entry", "entries")
        );
    }
    // The repair is judged as `check` judges the store: what it could not mend fails it.
    let after = bloomkv::check::check_store_with(Arc::new(OsFileSystem), dir)?;
    if !after.is_clean() {
        emit(&text)?;
        let problems: Vec<String> = after.problems.iter().map(|p| p.to_string()).collect();
        return Err(Failure::from(format!(
            "the store opens, but check still finds damage: {}",
            problems.join("; ")
        )));
    }
    text += "the store opens again and check finds no damage\n";
    emit(&text)
}

/// Fails unless `dir` is a directory: `repair` works on a store that may lack CURRENT.
fn require_store_files(dir: &Path) -> Result<(), Failure> {
    match dir.is_dir() {
        true => Ok(()),
        false => Err(no_store(dir)),
    }
}
