//! Starts a cluster on 127.0.0.1 in this process and runs a workload against it: puts through
//! the leader from concurrent clients, then linearizable gets through the leader, then stale
//! gets from a follower. The same workload runs on a one-node cluster for comparison.
//!
//!     cargo run --release --manifest-path replicated/Cargo.toml --example three_nodes -- \
//!         [--writes 20000] [--reads 20000] [--clients 16]

use std::collections::BTreeMap;
use std::time::Instant;

use bloomkv_replicated::client::Client;
use bloomkv_replicated::server::{Node, NodeOptions};

/// The allocator `bloomkv-node` runs with (`Cargo.toml` says why).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    writes: u64,
    reads: u64,
    clients: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        writes: 20_000,
        reads: 20_000,
        clients: 16,
    };
    let list: Vec<String> = std::env::args().skip(1).collect();
    for pair in list.chunks(2) {
        let [flag, value] = pair else {
            return Err(format!("{} needs a value", pair[0]));
        };
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: {value:?} is not a number"))?;
        match flag.as_str() {
            "--writes" => args.writes = n,
            "--reads" => args.reads = n,
            "--clients" => args.clients = n.max(1),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    #[cfg(feature = "mimalloc")]
    bloomkv_replicated::allocator::return_freed_memory_promptly();
    let args = match parse_args() {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("three_nodes: {msg}");
            std::process::exit(2);
        }
    };
    println!(
        "{} puts and {} gets of 16-byte keys and 100-byte values, {} concurrent clients",
        args.writes, args.reads, args.clients
    );
    for size in [3u64, 1] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut nodes = Vec::new();
        for id in 1..=size {
            let options = NodeOptions::new(id, "127.0.0.1:0", dir.path().join(format!("n{id}")));
            nodes.push(Node::start(options).await.expect("the node starts"));
        }
        let members: BTreeMap<u64, String> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (i as u64 + 1, n.addr.clone()))
            .collect();
        let addrs: Vec<String> = members.values().cloned().collect();
        Client::new(addrs.clone())
            .init(&addrs[0], members)
            .await
            .expect("the cluster initializes");

        let writes = args.writes;
        let puts = run(
            writes,
            args.clients,
            &addrs,
            move |mut client: Client, i| async move {
                client.put(&key(i), &value(i)).await.expect("put");
                client
            },
        )
        .await;
        let gets = run(
            args.reads,
            args.clients,
            &addrs,
            move |mut client: Client, i| async move {
                let got = client.get(&key(i % writes)).await.expect("get");
                assert_eq!(got, Some(value(i % writes).into_bytes()));
                client
            },
        )
        .await;
        let leader = nodes[0].raft.current_leader().await.expect("a leader");
        let confirming = &nodes[leader as usize - 1].status();
        let follower = nodes
            .iter()
            .enumerate()
            .find(|(i, _)| *i as u64 + 1 != leader)
            .map_or(addrs[0].clone(), |(_, n)| n.addr.clone());
        let target = follower.clone();
        let stale = run(
            args.reads,
            args.clients,
            &[follower],
            move |mut client: Client, i| {
                let target = target.clone();
                async move {
                    let got = client
                        .stale_get(&target, &key(i % writes))
                        .await
                        .expect("stale get");
                    assert!(got.is_none_or(|v| v == value(i % writes).as_bytes()));
                    client
                }
            },
        )
        .await;
        println!(
            "{size} node(s): {:>8.0} puts/s   {:>8.0} linearizable gets/s   {:>8.0} stale gets/s{}",
            args.writes as f64 / puts,
            args.reads as f64 / gets,
            args.reads as f64 / stale,
            if size > 1 { " (from a follower)" } else { "" }
        );
        println!(
            "             linearizable gets against stale: {:.2}x; {} leadership confirmations \
             for {} linearizable gets ({:.1} gets each)",
            stale / gets,
            confirming.read_confirmations,
            confirming.reads_confirmed,
            confirming.reads_confirmed as f64 / confirming.read_confirmations.max(1) as f64
        );
        for node in nodes {
            node.shutdown().await;
        }
    }
}

fn key(i: u64) -> String {
    format!("key{i:013}")
}

fn value(i: u64) -> String {
    format!("{i:0100}")
}

/// Runs `op` for indexes `0..n` over `clients` tasks, each with a client of its own; the
/// seconds it took.
async fn run<F, Fut>(n: u64, clients: u64, addrs: &[String], op: F) -> f64
where
    F: Fn(Client, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Client> + Send,
{
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (addrs, op) = (addrs.to_vec(), op.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = Client::new(addrs);
            for i in (c..n).step_by(clients as usize) {
                client = op(client, i).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("a client task");
    }
    started.elapsed().as_secs_f64()
}
