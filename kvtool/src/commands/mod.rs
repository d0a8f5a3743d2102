//! kvtool's commands, on bloomkv's public API only. This file only picks the function for
//! the parsed command; each job is a module of its own:
//! - `read.rs`: `get`, `scan`, `dump`;
//! - `write.rs`: `put`, `delete`, `load`;
//! - `stats.rs`: `stats`, as text and as JSON;
//! - `maintain.rs`: `check`, `compact`, `repair`;
//! - `sst.rs`: `sst`, one table file's properties.
//!
//! Below them is what they share: opening a store with kvtool's options (`open.rs`) and
//! printing (`output.rs`). `bench` is the harness in `src/bench/`. Imports point one way,
//! from the commands down to what they share.

mod maintain;
mod open;
mod output;
mod read;
mod sst;
pub(crate) mod stats;
mod write;

use open::store_dir;

use crate::cli::Command;
use crate::Failure;

/// Runs the parsed command.
pub fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Put {
            key,
            value,
            store,
            keys,
            keyspace,
            filter,
            opening,
        } => write::put(&key, &value, &store, &keys, &keyspace, &filter, &opening),
        Command::Get {
            key,
            store,
            keys,
            keyspace,
            opening,
        } => read::get(&key, &store, &keys, &keyspace, &opening),
        Command::Delete {
            key,
            store,
            keys,
            keyspace,
            filter,
            opening,
        } => write::delete(&key, &store, &keys, &keyspace, &filter, &opening),
        Command::DeleteRange {
            begin,
            end,
            store,
            keys,
            keyspace,
            filter,
            opening,
        } => {
            let range = (begin.as_str(), end.as_str());
            write::delete_range(range, &store, &keys, &keyspace, &filter, &opening)
        }
        Command::Scan {
            from,
            to,
            prefix,
            limit,
            keys_only,
            reverse,
            store,
            keys,
            keyspace,
            opening,
        } => {
            let range = read::ScanArgs {
                from,
                to,
                prefix,
                limit,
                keys_only,
                reverse,
            };
            read::scan(range, &store, &keys, &keyspace, &opening)
        }
        Command::Load {
            file,
            strict,
            store,
            keys,
            keyspace,
            filter,
            opening,
        } => {
            let target = write::LoadTarget {
                store: &store,
                keyspace: &keyspace,
                filter: &filter,
                opening: &opening,
            };
            write::load(file.as_deref(), strict, &keys, target)
        }
        Command::Dump {
            store,
            keys,
            keyspace,
            opening,
        } => read::dump(&store, &keys, &keyspace, &opening),
        Command::Stats {
            json,
            store,
            keys,
            keyspace,
            opening,
        } => stats::stats(json, &store, &keys, &keyspace, &opening),
        Command::Check { store } => maintain::check(store_dir(&store)?),
        Command::Compact {
            store,
            filter,
            opening,
        } => maintain::compact(&store, &filter, &opening),
        Command::Repair { store } => maintain::repair(store_dir(&store)?),
        Command::Sst { file, json, keys } => sst::sst(&file, keys.hex, json),
        Command::Bench(args) => crate::bench::run(&args),
    }
}
