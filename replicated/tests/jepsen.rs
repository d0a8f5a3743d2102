//! A Jepsen-style check: clients read, write and compare-and-swap a few keys of a three-node
//! cluster while a nemesis kills leaders, restarts nodes and cuts nodes off the network; the
//! history they record is then checked for linearizability, key by key (a register each),
//! with the Wing-Gong search as Lowe improved it (a cache of states already explored).
//!
//! Every node sits behind a proxy of its own, whose address is the one the cluster knows it
//! by, and connects to its peers from a loopback address of its own (127.0.0.11 to .13), so a
//! proxy can tell whose traffic it carries and refuse a peer's. Clients connect from
//! 127.0.0.1, which no partition cuts: a client reaching a node on the minority side waits
//! for an answer that does not come, as it would on a real network.
//!
//! `cargo test --test jepsen` runs a short history (20 nemesis events); the long one, 200
//! events, runs with `-- --ignored`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bloomkv_replicated::client::{Client, ClientError};
use bloomkv_replicated::server::{Node, NodeOptions};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

const NODES: u64 = 3;
const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const CLIENTS: usize = 4;

fn node_ip(id: u64) -> IpAddr {
    IpAddr::from([127, 0, 0, 10 + id as u8])
}

// ---------------------------------------------------------------------------------------
// The network: a proxy per node.

/// A proxy in front of one node: forwards every connection to the node's current address,
/// refuses and cuts connections from blocked peers, and cuts everything when the node
/// restarts (as a dying process would).
#[derive(Clone)]
struct Proxy {
    addr: String,
    state: Arc<Mutex<ProxyState>>,
}

struct ProxyState {
    target: Option<String>,
    blocked: HashSet<IpAddr>,
    live: Vec<(IpAddr, AbortHandle)>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Proxy {
            addr: listener.local_addr().unwrap().to_string(),
            state: Arc::new(Mutex::new(ProxyState {
                target: None,
                blocked: HashSet::new(),
                live: Vec::new(),
            })),
        };
        let serving = proxy.clone();
        tokio::spawn(async move {
            while let Ok((stream, from)) = listener.accept().await {
                serving.forward(stream, from.ip());
            }
        });
        proxy
    }

    fn forward(&self, mut inbound: TcpStream, from: IpAddr) {
        let mut state = self.state.lock().unwrap();
        let Some(target) = state.target.clone() else {
            return;
        };
        if state.blocked.contains(&from) {
            return;
        }
        let task = tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(&target).await {
                let _ = outbound.set_nodelay(true);
                let _ = inbound.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
        state.live.retain(|(_, t)| !t.is_finished());
        state.live.push((from, task.abort_handle()));
    }

    /// Points the proxy at a node (none: down), cutting every connection to the old one.
    fn set_target(&self, target: Option<String>) {
        let mut state = self.state.lock().unwrap();
        state.target = target;
        for (_, task) in state.live.drain(..) {
            task.abort();
        }
    }

    /// Refuses, and cuts, traffic from `peers`; an empty set heals.
    fn block(&self, peers: HashSet<IpAddr>) {
        let mut state = self.state.lock().unwrap();
        for (from, task) in &state.live {
            if peers.contains(from) {
                task.abort();
            }
        }
        state.blocked = peers;
    }
}

// ---------------------------------------------------------------------------------------
// The cluster, and the nemesis.

struct Cluster {
    root: tempfile::TempDir,
    proxies: Vec<Proxy>,
    nodes: Vec<Option<Node>>,
}

impl Cluster {
    async fn start() -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let mut proxies = Vec::new();
        for _ in 0..NODES {
            proxies.push(Proxy::start().await);
        }
        let mut cluster = Cluster {
            root,
            proxies,
            nodes: (0..NODES).map(|_| None).collect(),
        };
        for id in 1..=NODES {
            cluster.start_node(id).await;
        }
        let members: BTreeMap<u64, String> = (1..=NODES)
            .map(|id| (id, cluster.proxies[id as usize - 1].addr.clone()))
            .collect();
        Client::new(cluster.addrs())
            .init(&cluster.proxies[0].addr, members)
            .await
            .expect("the cluster initializes");
        cluster
    }

    fn addrs(&self) -> Vec<String> {
        self.proxies.iter().map(|p| p.addr.clone()).collect()
    }

    fn options(&self, id: u64) -> NodeOptions {
        let dir = self.root.path().join(format!("n{id}"));
        let mut options = NodeOptions::new(id, "127.0.0.1:0", dir);
        options.source_ip = Some(node_ip(id));
        options.snapshot_every = 200;
        options
    }

    async fn start_node(&mut self, id: u64) {
        // A node shut down a moment ago may still hold its store's lock while its tasks end.
        let started = Instant::now();
        let node = loop {
            match Node::start(self.options(id)).await {
                Ok(node) => break node,
                Err(e) if started.elapsed() < Duration::from_secs(10) => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("node {id} does not restart: {e}"),
            }
        };
        self.proxies[id as usize - 1].set_target(Some(node.addr.clone()));
        self.nodes[id as usize - 1] = Some(node);
    }

    async fn kill(&mut self, id: u64) {
        self.proxies[id as usize - 1].set_target(None);
        if let Some(node) = self.nodes[id as usize - 1].take() {
            node.shutdown().await;
        }
    }

    /// The leader some live node knows of.
    async fn leader(&self) -> Option<u64> {
        for node in self.nodes.iter().flatten() {
            if let Some(leader) = node.raft.current_leader().await {
                return Some(leader);
            }
        }
        None
    }

    /// Cuts node `id` off from the other nodes, both ways.
    fn isolate(&self, id: u64) {
        for other in 1..=NODES {
            let blocked: HashSet<IpAddr> = if other == id {
                (1..=NODES).filter(|&o| o != id).map(node_ip).collect()
            } else {
                [node_ip(id)].into()
            };
            self.proxies[other as usize - 1].block(blocked);
        }
    }

    fn heal(&self) {
        for proxy in &self.proxies {
            proxy.block(HashSet::new());
        }
    }

    async fn shutdown(mut self) {
        for id in 1..=NODES {
            self.kill(id).await;
        }
    }
}

/// A pseudo-random walk (xorshift), seeded: the same run makes the same choices.
struct Walk(u64);

impl Walk {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }
}

/// Injects `events` faults, one after another, each healed before the next: a leader
/// killed and restarted, a node restarted, a node cut off from its peers.
async fn nemesis(cluster: &mut Cluster, events: usize, seed: u64) -> BTreeMap<&'static str, usize> {
    let mut walk = Walk(seed | 1);
    let mut done = BTreeMap::new();
    for _ in 0..events {
        tokio::time::sleep(walk.millis(100, 400)).await;
        let kind = match walk.below(3) {
            0 => {
                let id = match cluster.leader().await {
                    Some(leader) => leader,
                    None => 1 + walk.below(NODES),
                };
                cluster.kill(id).await;
                tokio::time::sleep(walk.millis(200, 800)).await;
                cluster.start_node(id).await;
                "leader killed and restarted"
            }
            1 => {
                let id = 1 + walk.below(NODES);
                cluster.kill(id).await;
                cluster.start_node(id).await;
                "node restarted"
            }
            _ => {
                let id = 1 + walk.below(NODES);
                cluster.isolate(id);
                tokio::time::sleep(walk.millis(400, 1500)).await;
                cluster.heal();
                "node cut off, then healed"
            }
        };
        *done.entry(kind).or_insert(0) += 1;
    }
    done
}

// ---------------------------------------------------------------------------------------
// The history.

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Read,
    Write(String),
    Cas {
        expected: Option<String>,
        new: String,
    },
}

/// How an operation ended: with a result, or without one (a write that may or may not have
/// taken effect, at any time after it was called).
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Read(Option<String>),
    Written,
    Swapped,
    NotSwapped(Option<String>),
    Unknown,
}

/// A value as the text every client writes.
fn text(value: Vec<u8>) -> String {
    String::from_utf8(value).expect("the clients write text")
}

#[derive(Debug, Clone)]
struct Op {
    key: usize,
    call: Call,
    outcome: Outcome,
    /// Nanoseconds since the run began.
    called: u64,
    returned: Option<u64>,
}

type History = Arc<Mutex<Vec<Op>>>;

/// One client's operations until `stop`: reads, unique writes, and compare-and-swaps from
/// the last value it saw of the key.
async fn client_loop(
    number: usize,
    addrs: Vec<String>,
    history: History,
    start: Instant,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut client = Client::new(addrs);
    client.tries = 3;
    client.timeout = Duration::from_millis(1500);
    let mut walk = Walk(0x9e37_79b9 + number as u64 * 7919);
    let mut seen: HashMap<usize, Option<String>> = HashMap::new();
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        n += 1;
        let key = walk.below(KEYS.len() as u64) as usize;
        let value = format!("c{number}-{n}");
        let call = match walk.below(10) {
            0..=3 => Call::Read,
            4..=6 => Call::Write(value),
            _ => Call::Cas {
                expected: seen.get(&key).cloned().flatten(),
                new: value,
            },
        };
        let called = start.elapsed().as_nanos() as u64;
        let outcome = match &call {
            Call::Read => match client.get(KEYS[key]).await {
                Ok(v) => Outcome::Read(v.map(text)),
                // A read that failed changed nothing: it is left out.
                Err(_) => continue,
            },
            Call::Write(v) => match client.put(KEYS[key], v).await {
                Ok(_) => Outcome::Written,
                Err(e) => unknown(e),
            },
            Call::Cas { expected, new } => {
                match client
                    .compare_and_swap(
                        KEYS[key],
                        expected.as_deref().map(str::as_bytes),
                        Some(new.as_bytes()),
                    )
                    .await
                {
                    Ok(r) if r.superseded => panic!("a client's own write superseded: {r:?}"),
                    Ok(r) if r.swapped == Some(true) => Outcome::Swapped,
                    Ok(r) => Outcome::NotSwapped(r.found.map(|v| text(v.0))),
                    Err(e) => unknown(e),
                }
            }
        };
        let returned = (outcome != Outcome::Unknown).then(|| start.elapsed().as_nanos() as u64);
        match &outcome {
            Outcome::Read(v) | Outcome::NotSwapped(v) => {
                seen.insert(key, v.clone());
            }
            Outcome::Written | Outcome::Swapped => {
                let written = match &call {
                    Call::Write(v) | Call::Cas { new: v, .. } => v.clone(),
                    Call::Read => unreachable!("a read writes nothing"),
                };
                seen.insert(key, Some(written));
            }
            Outcome::Unknown => {}
        }
        history.lock().unwrap().push(Op {
            key,
            call,
            outcome,
            called,
            returned,
        });
    }
}

fn unknown(e: ClientError) -> Outcome {
    match e {
        ClientError::NoLeader | ClientError::NoReply(_) | ClientError::Io(_) => Outcome::Unknown,
        other => panic!("a write failed in a way it should not: {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// The checker: is one key's history linearizable, as a register?

/// The register's value after `op` runs on `state`, or `None` if `op` could not have returned
/// what it did there.
fn step(state: &Option<String>, op: &Op) -> Option<Option<String>> {
    match (&op.call, &op.outcome) {
        (Call::Read, Outcome::Read(v)) => (v == state).then(|| state.clone()),
        (Call::Write(v), Outcome::Written | Outcome::Unknown) => Some(Some(v.clone())),
        (Call::Cas { expected, new }, Outcome::Swapped) => {
            (expected == state).then(|| Some(new.clone()))
        }
        (Call::Cas { expected, .. }, Outcome::NotSwapped(found)) => {
            (found == state && expected != state).then(|| state.clone())
        }
        // Linearized at all, an unknown swap swapped or found another value.
        (Call::Cas { expected, new }, Outcome::Unknown) => Some(if expected == state {
            Some(new.clone())
        } else {
            state.clone()
        }),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Event {
    Call(usize),
    Return(usize),
}

/// The calls and returns of a history in time order, as a doubly linked list, so that the
/// search can lift an operation's two events out and put them back.
struct EventList {
    events: Vec<Event>,
    next: Vec<usize>,
    /// `usize::MAX` before the first.
    prev: Vec<usize>,
    head: usize,
    /// Each operation's call and return, by position in `events`.
    at: Vec<(usize, usize)>,
}

impl EventList {
    /// The events of `ops`: an unknown outcome returns after everything, and at equal times
    /// a return comes first (the operations did not overlap).
    fn of(ops: &[Op]) -> EventList {
        let mut timed: Vec<(u64, u8, Event)> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            timed.push((op.called, 1, Event::Call(i)));
            timed.push((op.returned.unwrap_or(u64::MAX), 0, Event::Return(i)));
        }
        timed.sort_by_key(|&(t, order, _)| (t, order));
        let n = timed.len();
        let mut at = vec![(0, 0); ops.len()];
        for (position, (_, _, event)) in timed.iter().enumerate() {
            match event {
                Event::Call(i) => at[*i].0 = position,
                Event::Return(i) => at[*i].1 = position,
            }
        }
        EventList {
            events: timed.into_iter().map(|(_, _, e)| e).collect(),
            next: (1..=n).collect(),
            prev: (0..n).map(|i| i.wrapping_sub(1)).collect(),
            head: 0,
            at,
        }
    }

    fn is_empty(&self) -> bool {
        self.head >= self.events.len()
    }

    /// The event at `position`; `None` past the last.
    fn get(&self, position: usize) -> Option<Event> {
        self.events.get(position).copied()
    }

    /// Takes operation `op`'s call and return out of the list.
    fn lift(&mut self, op: usize) {
        let (call, ret) = self.at[op];
        self.unlink(ret);
        self.unlink(call);
    }

    /// Puts operation `op`'s events back where they were; returns its call's position.
    fn put_back(&mut self, op: usize) -> usize {
        let (call, ret) = self.at[op];
        self.relink(ret);
        self.relink(call);
        call
    }

    fn unlink(&mut self, at: usize) {
        let (p, n) = (self.prev[at], self.next[at]);
        match p {
            usize::MAX => self.head = n,
            p => self.next[p] = n,
        }
        if n < self.events.len() {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, at: usize) {
        let (p, n) = (self.prev[at], self.next[at]);
        match p {
            usize::MAX => self.head = at,
            p => self.next[p] = at,
        }
        if n < self.events.len() {
            self.prev[n] = at;
        }
    }
}

/// A random 64-bit number per operation, for remembering a set of them as the XOR of theirs
/// (Zobrist hashing). From splitmix64: xorshift's outputs are linear over GF(2), so some sets
/// of them XOR to the same value, where splitmix64's finalizer is not.
fn zobrist_keys(count: usize) -> Vec<u64> {
    (1..=count as u64)
        .map(|i| {
            let mut z = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
        .collect()
}

/// Whether `ops` (one key's) are linearizable: some order of them, each placed between its
/// call and its return (an unknown outcome has no return, and may also never have taken
/// effect), runs on a register that starts absent and returns what each returned.
///
/// The Wing-Gong search with Lowe's cache: walking the events from the first, place an
/// operation whose call comes before any unplaced return if the register allows what it
/// returned, and start again from the first; meeting a return of an operation not yet
/// placed, undo the last placement and try the next call after it. States already explored
/// (the operations placed, and the register's value) are not explored again.
fn linearizable(ops: &[Op]) -> bool {
    let mut list = EventList::of(ops);
    let zobrist = zobrist_keys(ops.len());
    let mut placed = 0u64;
    let mut seen: HashSet<(u64, Option<String>)> = HashSet::new();
    let mut stack: Vec<(usize, Option<String>)> = Vec::new();
    let mut state: Option<String> = None;
    let mut entry = list.head;
    while !list.is_empty() {
        match list.get(entry) {
            Some(Event::Call(op)) => {
                let after = step(&state, &ops[op]);
                match after {
                    Some(after) if seen.insert((placed ^ zobrist[op], after.clone())) => {
                        placed ^= zobrist[op];
                        stack.push((op, std::mem::replace(&mut state, after)));
                        list.lift(op);
                        entry = list.head;
                    }
                    _ => entry = list.next[entry],
                }
            }
            // Only unknown outcomes are left unplaced (their returns come last): they never
            // took effect.
            Some(Event::Return(op)) if ops[op].returned.is_none() => return true,
            // An operation returned before it could be placed, or nothing is left to try
            // from here: undo the last placement.
            _ => {
                let Some((op, before)) = stack.pop() else {
                    return false;
                };
                placed ^= zobrist[op];
                state = before;
                let call = list.put_back(op);
                entry = list.next[call];
            }
        }
    }
    true
}

/// Leaves out writes with an unknown outcome whose value nobody saw: had one taken effect,
/// nothing read it before it was overwritten, so the history is linearizable with it if and
/// only if it is without it, and each one left in doubles the orders to search.
fn without_unseen_unknowns(ops: Vec<Op>) -> Vec<Op> {
    let seen: HashSet<String> = ops
        .iter()
        .filter_map(|op| match &op.outcome {
            Outcome::Read(v) | Outcome::NotSwapped(v) => v.clone(),
            _ => None,
        })
        .chain(ops.iter().filter_map(|op| match &op.call {
            Call::Cas { expected, .. } => expected.clone(),
            _ => None,
        }))
        .collect();
    ops.into_iter()
        .filter(|op| {
            op.outcome != Outcome::Unknown
                || match &op.call {
                    Call::Write(v) | Call::Cas { new: v, .. } => seen.contains(v),
                    Call::Read => false,
                }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// The runs.

async fn run(events: usize, seed: u64) {
    let mut cluster = Cluster::start().await;
    let start = Instant::now();
    let history: History = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for number in 0..CLIENTS {
        clients.push(tokio::spawn(client_loop(
            number,
            cluster.addrs(),
            Arc::clone(&history),
            start,
            Arc::clone(&stop),
        )));
    }
    let injected = nemesis(&mut cluster, events, seed).await;
    cluster.heal();
    // Let the clients work on a healed cluster for a moment, then stop them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for client in clients {
        client.await.unwrap();
    }
    // A last read of every key, on the healed cluster.
    let mut reader = Client::new(cluster.addrs());
    for (key, name) in KEYS.iter().enumerate() {
        let called = start.elapsed().as_nanos() as u64;
        let value = reader
            .get(name)
            .await
            .expect("a read on the healed cluster");
        history.lock().unwrap().push(Op {
            key,
            call: Call::Read,
            outcome: Outcome::Read(value.map(text)),
            called,
            returned: Some(start.elapsed().as_nanos() as u64),
        });
    }
    cluster.shutdown().await;

    let ops = std::mem::take(&mut *history.lock().unwrap());
    let total = ops.len();
    let unknown = ops.iter().filter(|o| o.outcome == Outcome::Unknown).count();
    let mut violations = Vec::new();
    for (key, name) in KEYS.iter().enumerate() {
        let of_key: Vec<Op> = ops.iter().filter(|o| o.key == key).cloned().collect();
        let of_key = without_unseen_unknowns(of_key);
        if !linearizable(&of_key) {
            violations.push(*name);
        }
    }
    eprintln!(
        "{events} nemesis events {injected:?}; {total} operations ({unknown} with unknown \
         outcomes) over {:.1} s; not linearizable: {violations:?}",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(injected.values().sum::<usize>(), events);
    assert!(
        total >= events * 2,
        "{total} operations: the clients hardly ran"
    );
    assert!(
        violations.is_empty(),
        "keys {violations:?} are not linearizable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_history_under_faults_is_linearizable() {
    run(20, 42).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "about five minutes: cargo test --test jepsen -- --ignored"]
async fn a_long_history_under_faults_is_linearizable() {
    run(200, 7).await;
}

// ---------------------------------------------------------------------------------------
// The checker's own tests: it must reject what is not linearizable.

fn op(key: usize, call: Call, outcome: Outcome, called: u64, returned: Option<u64>) -> Op {
    Op {
        key,
        call,
        outcome,
        called,
        returned,
    }
}

fn some(v: &str) -> Option<String> {
    Some(v.to_string())
}

#[test]
fn the_checker_accepts_orders_within_overlaps_and_rejects_the_impossible() {
    let write = |v: &str, c, r| op(0, Call::Write(v.into()), Outcome::Written, c, Some(r));
    let read = |v: Option<String>, c, r| op(0, Call::Read, Outcome::Read(v), c, Some(r));
    // Sequential: a read after a write sees it.
    assert!(linearizable(&[write("a", 0, 1), read(some("a"), 2, 3)]));
    assert!(!linearizable(&[write("a", 0, 1), read(None, 2, 3)]));
    // A stale read after a newer write returned.
    assert!(!linearizable(&[
        write("a", 0, 1),
        write("b", 2, 3),
        read(some("a"), 4, 5)
    ]));
    // Overlapping: the read may come before or after the write.
    assert!(linearizable(&[write("a", 0, 10), read(None, 1, 2)]));
    assert!(linearizable(&[write("a", 0, 10), read(some("a"), 1, 2)]));
    // Two reads that disagree on the order of two overlapping writes.
    assert!(!linearizable(&[
        write("a", 0, 10),
        write("b", 0, 10),
        read(some("a"), 11, 12),
        read(some("b"), 13, 14),
        read(some("a"), 15, 16),
    ]));
    // A write applied twice (the duplicate a retry could make) is caught.
    assert!(!linearizable(&[
        write("a", 0, 1),
        write("b", 2, 3),
        read(some("b"), 4, 5),
        read(some("a"), 6, 7),
    ]));
    // An unknown write may take effect late, or never.
    let lost = op(0, Call::Write("x".into()), Outcome::Unknown, 0, None);
    assert!(linearizable(&[lost.clone(), read(None, 5, 6)]));
    assert!(linearizable(&[
        lost.clone(),
        read(None, 5, 6),
        read(some("x"), 7, 8)
    ]));
    assert!(!linearizable(&[
        lost,
        read(some("x"), 5, 6),
        read(None, 7, 8)
    ]));
    // Compare-and-swap: swapped from what was there, or found another value.
    let cas = |e: Option<String>, n: &str, outcome, c, r| {
        op(
            0,
            Call::Cas {
                expected: e,
                new: n.into(),
            },
            outcome,
            c,
            Some(r),
        )
    };
    assert!(linearizable(&[
        write("a", 0, 1),
        cas(some("a"), "b", Outcome::Swapped, 2, 3),
        cas(some("a"), "c", Outcome::NotSwapped(some("b")), 4, 5),
        read(some("b"), 6, 7),
    ]));
    assert!(!linearizable(&[
        write("a", 0, 1),
        cas(some("z"), "b", Outcome::Swapped, 2, 3),
    ]));
    assert!(!linearizable(&[
        write("a", 0, 1),
        cas(some("a"), "b", Outcome::NotSwapped(some("a")), 2, 3),
    ]));
}
