//! Runs one node of the replicated service, or talks to one.
//!
//!     bloomkv-node serve --id 1 --addr 127.0.0.1:21001 --dir /tmp/n1 [--snapshot-every 5000]
//!     bloomkv-node client --addr 127.0.0.1:21001 init 1=127.0.0.1:21001,2=127.0.0.1:21002
//!     bloomkv-node client --addr 127.0.0.1:21001 put KEY VALUE
//!     bloomkv-node client --addr 127.0.0.1:21001 get KEY [--stale]
//!     bloomkv-node client --addr 127.0.0.1:21001 delete KEY
//!     bloomkv-node client --addr 127.0.0.1:21001 add-learner ID ADDR
//!     bloomkv-node client --addr 127.0.0.1:21001 change-membership 1,2,3
//!     bloomkv-node client --addr 127.0.0.1:21001 status
//!     bloomkv-node gen-certs DIR 1,2,3
//!
//! With TLS: `--tls-ca`, `--tls-cert` and `--tls-key` on every node (and `--client-tokens-file`
//! for tokens that let clients write); `--tls-ca`, and a certificate or `--token-file`, on
//! clients that write (`docs/replication.md`, "Security").

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use bloomkv_replicated::certs;
use bloomkv_replicated::client::Client;
use bloomkv_replicated::server::{Node, NodeOptions};
use bloomkv_replicated::transport::{ClientTls, NodeTls};
use bloomkv_replicated::NodeId;

/// gRPC allocates and frees buffers on every call, from every core: mimalloc's per-thread
/// heaps serve that without the lock contention of glibc's arenas (`src/allocator.rs`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage:
  bloomkv-node serve --id N --addr HOST:PORT --dir PATH [--snapshot-every N]
               [--snapshot-chunk-bytes N] [--max-message-bytes N]
               [--tls-ca PEM --tls-cert PEM --tls-key PEM [--tls-client-ca PEM]]
               [--client-tokens-file PATH]
  bloomkv-node client --addr HOST:PORT [--tls-ca PEM [--tls-cert PEM --tls-key PEM]]
               [--token-file PATH] [--max-message-bytes N]
               (init ID=ADDR,... | put KEY VALUE | get KEY [--stale]
               | delete KEY | cas KEY EXPECTED|- NEW|- | load COUNT [FIRST] | add-learner ID ADDR
               | change-membership ID,... | status)
  bloomkv-node gen-certs DIR ID,...    (test certificates: a CA, nodes, a client)";

fn main() -> ExitCode {
    #[cfg(feature = "mimalloc")]
    bloomkv_replicated::allocator::return_freed_memory_promptly();
    // Raft's warnings (a peer unreachable, a snapshot transfer that failed) on standard
    // error; RUST_LOG chooses more or less (`RUST_LOG=openraft=info`).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    let result = match args.first().map(String::as_str) {
        Some("serve") => runtime.block_on(serve(&args[1..])),
        Some("client") => runtime.block_on(client(&args[1..])),
        Some("gen-certs") => gen_certs(&args[1..]),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => fail(&msg),
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("bloomkv-node: {msg}");
    ExitCode::from(2)
}

/// The value after `--name`, and the arguments without the pair.
fn take_flag(args: &mut Vec<String>, name: &str) -> Result<Option<String>, String> {
    let Some(at) = args.iter().position(|a| a == name) else {
        return Ok(None);
    };
    if at + 1 >= args.len() {
        return Err(format!("{name} needs a value\n{USAGE}"));
    }
    let value = args.remove(at + 1);
    args.remove(at);
    Ok(Some(value))
}

/// `--tls-ca`, `--tls-cert` and `--tls-key`, taken out of `args`: none without `--tls-ca`.
type TlsFiles = (String, Option<String>, Option<String>);

fn tls_files(args: &mut Vec<String>) -> Result<Option<TlsFiles>, String> {
    let ca = take_flag(args, "--tls-ca")?;
    let cert = take_flag(args, "--tls-cert")?;
    let key = take_flag(args, "--tls-key")?;
    match ca {
        Some(ca) => Ok(Some((ca, cert, key))),
        None if cert.is_some() || key.is_some() => {
            Err("--tls-cert and --tls-key need --tls-ca".to_string())
        }
        None => Ok(None),
    }
}

/// The tokens in the file at `path`, one a line (kept out of the command line, which other
/// users of the machine can read).
fn read_tokens(path: &str) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let tokens: Vec<String> = (text.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if tokens.is_empty() {
        return Err(format!("{path}: no token in it"));
    }
    Ok(tokens)
}

/// A value on the command line, where `-` stands for none (an absent key, or a delete).
fn optional(word: &str) -> Option<&str> {
    (word != "-").then_some(word)
}

/// A value as text: itself when it is UTF-8, else with its other bytes escaped (`\xff`).
fn printable(value: &[u8]) -> String {
    match std::str::from_utf8(value) {
        Ok(text) => text.to_string(),
        Err(_) => value.escape_ascii().to_string(),
    }
}

fn parse<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what} {text:?} is not a number"))
}

fn gen_certs(args: &[String]) -> Result<(), String> {
    let [dir, ids] = args else {
        return Err(format!("gen-certs takes a directory and node ids\n{USAGE}"));
    };
    let ids: Vec<u64> = ids
        .split(',')
        .map(|id| parse("node id", id))
        .collect::<Result<_, _>>()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    certs::generate(Path::new(dir), &ids).map_err(|e| e.to_string())?;
    println!("wrote ca.pem, node{{N}}.pem and .key, client-ca.pem, client.pem and .key to {dir}");
    Ok(())
}

async fn serve(args: &[String]) -> Result<(), String> {
    let mut args = args.to_vec();
    let id = take_flag(&mut args, "--id")?.ok_or(format!("--id is required\n{USAGE}"))?;
    let addr = take_flag(&mut args, "--addr")?.ok_or(format!("--addr is required\n{USAGE}"))?;
    let dir = take_flag(&mut args, "--dir")?.ok_or(format!("--dir is required\n{USAGE}"))?;
    let every = take_flag(&mut args, "--snapshot-every")?;
    let chunk = take_flag(&mut args, "--snapshot-chunk-bytes")?;
    let max_message = take_flag(&mut args, "--max-message-bytes")?;
    let tokens = take_flag(&mut args, "--client-tokens-file")?;
    let client_ca = take_flag(&mut args, "--tls-client-ca")?;
    let tls = tls_files(&mut args)?;
    if let Some(extra) = args.first() {
        return Err(format!("unexpected argument {extra:?}\n{USAGE}"));
    }
    let mut options = NodeOptions::new(parse("--id", &id)?, addr, dir);
    if tls.is_none() && client_ca.is_some() {
        return Err("--tls-client-ca needs --tls-ca".to_string());
    }
    if let Some((ca, cert, key)) = tls {
        let (cert, key) = cert
            .zip(key)
            .ok_or("a node's TLS needs --tls-cert and --tls-key")?;
        let client_ca = client_ca.as_deref().map(Path::new);
        let tls =
            NodeTls::from_pem_files(Path::new(&ca), client_ca, Path::new(&cert), Path::new(&key))
                .map_err(|e| e.to_string())?;
        options.tls = Some(tls);
    }
    if let Some(path) = tokens {
        options.client_tokens = read_tokens(&path)?;
    }
    if let Some(max) = max_message {
        options.max_message_bytes = parse("--max-message-bytes", &max)?;
    }
    if let Some(every) = every {
        options.snapshot_every = parse("--snapshot-every", &every)?;
    }
    if let Some(chunk) = chunk {
        options.snapshot_chunk_bytes = parse("--snapshot-chunk-bytes", &chunk)?;
        if options.snapshot_chunk_bytes == 0 {
            return Err("--snapshot-chunk-bytes must be at least 1".to_string());
        }
    }
    let node = Node::start(options)
        .await
        .map_err(|e| format!("cannot start the node: {e}"))?;
    eprintln!("bloomkv-node: node serving on {}", node.addr);
    // Runs until the process is stopped.
    std::future::pending::<()>().await;
    Ok(())
}

async fn client(args: &[String]) -> Result<(), String> {
    let mut args = args.to_vec();
    let addr = take_flag(&mut args, "--addr")?.ok_or(format!("--addr is required\n{USAGE}"))?;
    let stale = args.iter().any(|a| a == "--stale");
    args.retain(|a| a != "--stale");
    let token = take_flag(&mut args, "--token-file")?;
    let max_message = take_flag(&mut args, "--max-message-bytes")?;
    let tls = tls_files(&mut args)?;
    let mut client = Client::new([addr.clone()]);
    if let Some(max) = max_message {
        client.max_message = parse("--max-message-bytes", &max)?;
    }
    if let Some((ca, cert, key)) = tls {
        let identity = match (&cert, &key) {
            (Some(cert), Some(key)) => Some((Path::new(cert), Path::new(key))),
            (None, None) => None,
            _ => return Err("a client certificate needs both --tls-cert and --tls-key".into()),
        };
        let tls = ClientTls::from_pem_files(Path::new(&ca), identity).map_err(|e| e.to_string())?;
        client.tls = Some(tls);
    }
    if let Some(path) = token {
        let tokens = read_tokens(&path)?;
        client.token = Some(
            tokens
                .into_iter()
                .next()
                .ok_or(format!("{path}: no token"))?,
        );
    }
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let shown = |e: bloomkv_replicated::client::ClientError| e.to_string();
    match words.as_slice() {
        ["init", members] => {
            let mut map = BTreeMap::new();
            for member in members.split(',') {
                let (id, member_addr) = member
                    .split_once('=')
                    .ok_or(format!("member {member:?} is not ID=ADDR"))?;
                map.insert(parse::<NodeId>("node id", id)?, member_addr.to_string());
            }
            client.init(&addr, map).await.map_err(shown)?;
        }
        ["put", key, value] => {
            let response = client.put(key, value).await.map_err(shown)?;
            println!("ok, log index {}", response.index);
        }
        ["load", count] => load(&mut client, parse("count", count)?, 0).await?,
        ["load", count, first] => {
            load(&mut client, parse("count", count)?, parse("first", first)?).await?
        }
        ["cas", key, expected, new] => {
            let (expected, new) = (optional(expected), optional(new));
            let response =
                (client.compare_and_swap(key, expected.map(str::as_bytes), new.map(str::as_bytes)))
                    .await
                    .map_err(shown)?;
            match response.swapped {
                Some(true) => println!("swapped, log index {}", response.index),
                _ => {
                    let found = match &response.found {
                        Some(value) => printable(value.as_bytes()),
                        None => "(absent)".to_string(),
                    };
                    return Err(format!("not swapped: {key} holds {found}"));
                }
            }
        }
        ["delete", key] => {
            let response = client.delete(key).await.map_err(shown)?;
            println!("ok, log index {}", response.index);
        }
        ["get", key] => {
            let value = if stale {
                client.stale_get(&addr, key).await
            } else {
                client.get(key).await
            };
            match value.map_err(shown)? {
                Some(v) => println!("{}", printable(&v)),
                None => return Err(format!("{key}: not found")),
            }
        }
        ["add-learner", id, learner_addr] => {
            client
                .add_learner(parse("node id", id)?, learner_addr)
                .await
                .map_err(shown)?;
        }
        ["change-membership", voters] => {
            let voters: BTreeSet<NodeId> = voters
                .split(',')
                .map(|v| parse("node id", v))
                .collect::<Result<_, _>>()?;
            client.change_membership(voters).await.map_err(shown)?;
        }
        ["status"] => {
            let status = client.status(&addr).await.map_err(shown)?;
            println!("{status:?}");
        }
        _ => return Err(USAGE.to_string()),
    }
    Ok(())
}

/// Puts keys `key` + 13 digits from `first` to `first + count`, each with a value of 100
/// printable characters drawn from the key's number (`load_value`: as random as the
/// tables' compression sees it), 1,000 to a write.
async fn load(client: &mut Client, count: u64, first: u64) -> Result<(), String> {
    let started = std::time::Instant::now();
    let end = first.checked_add(count).ok_or("first + count overflows")?;
    let mut at = first;
    while at < end {
        let upto = end.min(at + 1000);
        let pairs = (at..upto).map(|i| (format!("key{i:013}"), load_value(i)));
        client.put_many(pairs).await.map_err(|e| e.to_string())?;
        at = upto;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "loaded {count} keys in {seconds:.1} s ({:.0} a second)",
        count as f64 / seconds.max(1e-9)
    );
    Ok(())
}

/// The value `load` puts under key number `i`: 100 characters of the 94 printable ASCII ones,
/// from a xorshift walk seeded by `i`, so that any node's copy can be checked.
fn load_value(i: u64) -> String {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..100)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 94) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::load_value;

    #[test]
    fn load_values_are_100_printable_characters_of_their_key() {
        let (a, b) = (load_value(0), load_value(1));
        assert_eq!(a.len(), 100);
        assert!(a.bytes().all(|c| c.is_ascii_graphic()));
        assert_ne!(a, b);
        assert_eq!(load_value(1), b);
    }
}
