//! The HTTP listener's limits against slow clients, over real sockets on loopback: the real
//! `warden gateway` binary in front of a small upstream that answers every request. Clients
//! come from chosen loopback addresses (127.0.0.N, bound before connecting), so that each is a
//! distinct peer to the per-peer cap. Every wait is bounded; the limits are those documented in
//! docs/GATEWAY.md ("The HTTP listener's limits").

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

const DOCUMENT: &str =
    "schema: warden/v1\nenvironment: production\nactions:\n  mcp.acme.read_only:\n    decision: allow\n";

/// The listener's limits, as docs/GATEWAY.md states them.
const HEAD_DEADLINE: Duration = Duration::from_secs(10);
const BODY_DEADLINE: Duration = Duration::from_secs(10);
const MAX_PER_PEER: usize = 16;
/// How long a normal client may wait, whatever the slow ones do. A listener without the cut for
/// room frees a slot only when a slow socket reaches its head deadline, so its first probe waits
/// about 7.5 s; with the cut, the wait is `GRACE` (1 s) plus scheduling — milliseconds to about
/// 1.3 s measured on 2 loaded cores. Half the head deadline tells the two apart without
/// depending on the machine's speed; the times are printed, not asserted tighter.
const NORMAL_CLIENT_DEADLINE: Duration = Duration::from_secs(5);

/// The slow-socket attacks run one at a time: two at once on two cores measure the machine.
static ONE_ATTACK_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Gateway {
    child: Child,
    address: SocketAddr,
    _stdout: BufReader<std::process::ChildStdout>,
    _dir: tempfile::TempDir,
    _upstream: support::Server,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway on 127.0.0.1 whose upstream answers every request with an empty result.
fn gateway() -> Gateway {
    gateway_with(&[])
}

/// `gateway()` with extra command-line arguments.
fn gateway_with(extra: &[&str]) -> Gateway {
    let upstream = support::Server::http(|mut conn, _| {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        conn.send(&support::response("200 OK", &[("content-type", "application/json")], body));
        Some(conn)
    });
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("warden.yaml"), DOCUMENT).expect("document");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_remove("WARDEN_STORE")
        .env_remove("WARDEN_CONFIG")
        .args(["gateway", "--upstream", upstream.url("/mcp").as_str(), "--alias", "acme"])
        .args(["--listen", "127.0.0.1:0", "--principal-header", "X-Agent"])
        .args(["--config", &path("warden.yaml"), "--store", &path("store.redb")])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the gateway");
    // The gateway's stdout stays open for as long as it runs: it exits when stdout is gone.
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("first line");
    let address = first
        .strip_prefix("warden gateway: listening on http://")
        .and_then(|rest| rest.trim().strip_suffix("/mcp"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    Gateway { child, address, _stdout: stdout, _dir: dir, _upstream: upstream }
}

/// A connection to `to` from 127.0.0.`peer`.
fn connect_from(peer: u8, to: SocketAddr) -> std::io::Result<TcpStream> {
    use rustix::net::{bind, connect, socket, AddressFamily, SocketType};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None)?;
    bind(&fd, &SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, peer), 0))?;
    connect(&fd, &to)?;
    Ok(TcpStream::from(fd))
}

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

fn ping_request(address: SocketAddr) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nX-Agent: normal\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{PING}",
        PING.len()
    )
}

/// The status and body of the answer on `stream`, read until the gateway closes or `bound`.
fn answer(stream: &mut TcpStream, bound: Duration) -> (u16, String) {
    let until = Instant::now() + bound;
    let mut raw = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
        }
    }
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, raw)
}

/// A normal client from 127.0.0.`peer`: its whole exchange must end within its own deadline.
fn normal_client(gateway: &Gateway, peer: u8) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut stream = match connect_from(peer, gateway.address) {
        Ok(stream) => stream,
        Err(e) => return (0, format!("could not connect: {e}"), started.elapsed()),
    };
    if stream.write_all(ping_request(gateway.address).as_bytes()).is_err() {
        return (0, "could not send".into(), started.elapsed());
    }
    let (status, raw) = answer(&mut stream, NORMAL_CLIENT_DEADLINE);
    (status, raw, started.elapsed())
}

/// Send `bytes` one at a time, `every` apart, on a thread of its own (it stops at the first
/// failed write, or after the last byte).
fn trickle(stream: &TcpStream, bytes: Vec<u8>, every: Duration) -> std::thread::JoinHandle<()> {
    let mut writer = stream.try_clone().expect("clone");
    std::thread::spawn(move || {
        for byte in bytes {
            if writer.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(every);
        }
    })
}

fn endless_head(address: SocketAddr) -> Vec<u8> {
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {address}\r\nX-Slow: ").into_bytes();
    head.extend(std::iter::repeat_n(b'a', 200));
    head
}

#[test]
fn a_request_head_trickled_byte_by_byte_is_cut_at_the_head_deadline_not_after() {
    let gateway = gateway();
    let mut stream = connect_from(2, gateway.address).expect("connect");
    let started = Instant::now();
    // A byte every 500 ms: each would reset a per-read timeout, and the head never ends.
    let writer = trickle(&stream, endless_head(gateway.address), Duration::from_millis(500));
    let (status, raw) = answer(&mut stream, HEAD_DEADLINE + Duration::from_secs(5));
    let took = started.elapsed();
    assert_eq!(status, 408, "{raw:?} after {took:?}");
    assert!(raw.contains("head_deadline"), "the reply names the limit: {raw:?}");
    assert!(took + Duration::from_millis(200) >= HEAD_DEADLINE, "cut before the deadline: {took:?}");
    assert!(took <= HEAD_DEADLINE + Duration::from_secs(1), "cut after the deadline: {took:?}");
    drop(stream);
    let _ = writer.join();
}

#[test]
fn a_request_body_trickled_byte_by_byte_is_cut_at_the_body_deadline_not_after() {
    let gateway = gateway();
    let mut stream = connect_from(5, gateway.address).expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nX-Agent: slow\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        gateway.address
    );
    stream.write_all(head.as_bytes()).expect("head");
    let started = Instant::now();
    let writer = trickle(&stream, vec![b' '; 100], Duration::from_millis(500));
    let (status, raw) = answer(&mut stream, BODY_DEADLINE + Duration::from_secs(5));
    let took = started.elapsed();
    assert_eq!(status, 408, "{raw:?} after {took:?}");
    assert!(raw.contains("body_deadline"), "the reply names the limit: {raw:?}");
    // 100 bytes at the minimum rate add under 2 ms to the deadline.
    assert!(took + Duration::from_millis(200) >= BODY_DEADLINE, "cut before the deadline: {took:?}");
    assert!(took <= BODY_DEADLINE + Duration::from_secs(1), "cut after the deadline: {took:?}");
    drop(stream);
    let _ = writer.join();
}

#[test]
fn one_peer_gets_at_most_its_cap_of_connections_and_others_are_still_served() {
    let gateway = gateway();
    let idle: Vec<TcpStream> = (0..MAX_PER_PEER).map(|_| connect_from(3, gateway.address).expect("connect")).collect();
    let mut over = connect_from(3, gateway.address).expect("connect");
    let (status, raw) = answer(&mut over, Duration::from_secs(2));
    assert_eq!(status, 429, "{raw:?}");
    assert!(raw.contains("per_peer_connections"), "the reply names the limit: {raw:?}");
    assert!(raw.to_ascii_lowercase().contains("retry-after: 1"), "{raw:?}");
    // Another peer is not counted against that one.
    let (status, raw, took) = normal_client(&gateway, 4);
    assert_eq!(status, 200, "{raw:?} after {took:?}");
    // The twin: once one of the peer's connections closes, the peer is served again.
    drop(idle.into_iter().next());
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let (status, raw, took) = normal_client(&gateway, 3);
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the peer stayed refused: {status} {raw:?} after {took:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The cap is the operator's (`--max-connections-per-peer`, for a gateway behind a proxy): at it
/// a connection is refused naming the cap, one below it is served; values outside 1..=64 are a
/// usage error that names the range.
#[test]
fn the_per_peer_cap_is_set_by_the_operator_and_bounded() {
    let gateway = gateway_with(&["--max-connections-per-peer", "3"]);
    let idle: Vec<TcpStream> = (0..2).map(|_| connect_from(5, gateway.address).expect("connect")).collect();
    let (status, raw, took) = normal_client(&gateway, 5);
    assert_eq!(status, 200, "the third connection is within the cap: {raw:?} after {took:?}");
    let mut held = idle;
    held.push(connect_from(5, gateway.address).expect("connect"));
    let mut over = connect_from(5, gateway.address).expect("connect");
    let (status, raw) = answer(&mut over, Duration::from_secs(2));
    assert_eq!(status, 429, "{raw:?}");
    assert!(raw.contains("already has 3 connections"), "the reply names the cap in force: {raw:?}");
    drop(held);
    for bad in ["0", "65", "many"] {
        let out = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["gateway", "--upstream", "http://127.0.0.1:9/mcp", "--max-connections-per-peer", bad])
            .output()
            .expect("run warden");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--max-connections-per-peer"), "{bad}: {stderr}");
    }
}

/// One slow client: a connection from `peer` that sends one byte of a head that never ends
/// every `every`, reconnecting when the gateway answers it or cuts it (as an attacker would).
struct Slow {
    peer: u8,
    stream: Option<TcpStream>,
    sent: usize,
    due: Instant,
}

/// What the slow clients saw: connections opened, and the answers they got by limit name.
#[derive(Debug, Default)]
struct Attack {
    opened: usize,
    answers: std::collections::BTreeMap<String, usize>,
    open_at_the_end: usize,
}

/// `sockets` slow clients spread over the peers 127.0.0.`peers` for `length`, each sending a
/// byte of its head every 2 s; meanwhile a normal client (from a peer of its own, 127.0.0.100
/// and on) is sent four times, and each must be answered within its own deadline.
fn under_attack(sockets: usize, peers: std::ops::Range<u8>, length: Duration) -> Attack {
    let _alone = ONE_ATTACK_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let gateway = gateway();
    let address = gateway.address;
    let head = endless_head(address);
    let every = Duration::from_secs(2);
    let started = Instant::now();
    let spread = peers.len();
    let mut slow: Vec<Slow> = (0..sockets)
        .map(|i| Slow {
            peer: peers.start + (i % spread) as u8,
            stream: None,
            sent: 0,
            due: started + every * (i as u32) / (sockets as u32),
        })
        .collect();
    let attack = std::thread::spawn(move || {
        let mut seen = Attack::default();
        let mut buffer = [0u8; 1024];
        while started.elapsed() < length {
            let now = Instant::now();
            for one in slow.iter_mut().filter(|one| one.due <= now) {
                one.due = now + every;
                if let Some(stream) = &mut one.stream {
                    // An answer (a refusal or a cut) or a close: this one starts over.
                    let _ = stream.set_nonblocking(true);
                    let got = stream.read(&mut buffer);
                    let _ = stream.set_nonblocking(false);
                    let over = match got {
                        Ok(n) => {
                            let text = String::from_utf8_lossy(&buffer[..n]);
                            let name = text.split("\"error\":\"").nth(1).and_then(|rest| rest.split('"').next());
                            *seen.answers.entry(name.unwrap_or("closed").to_owned()).or_default() += 1;
                            true
                        }
                        Err(_) => false,
                    };
                    if over || stream.write_all(&head[one.sent % head.len()..][..1]).is_err() {
                        one.stream = None;
                    } else {
                        one.sent += 1;
                    }
                }
                if one.stream.is_none() {
                    if let Ok(mut stream) = connect_from(one.peer, address) {
                        seen.opened += 1;
                        one.sent = usize::from(stream.write_all(&head[..1]).is_ok());
                        one.stream = Some(stream);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        seen.open_at_the_end = slow.iter().filter(|one| one.stream.is_some()).count();
        seen
    });
    // Let every slow socket connect and start trickling, then look in now and then.
    std::thread::sleep(Duration::from_millis(2500));
    for probe in 0..4u8 {
        let (status, raw, took) = normal_client(&gateway, 100 + probe);
        assert_eq!(status, 200, "probe {probe}: {raw:?} after {took:?}");
        assert!(took <= NORMAL_CLIENT_DEADLINE, "probe {probe} took {took:?}");
        eprintln!("{sockets} slow sockets, probe {probe}: served in {took:?}");
        std::thread::sleep(Duration::from_secs(1));
    }
    let seen = attack.join().expect("the slow clients");
    eprintln!("{sockets} slow sockets: {seen:?}");
    assert!(seen.open_at_the_end * 4 >= sockets * 3, "the slow sockets stayed open: {seen:?}");
    seen
}

#[test]
fn two_hundred_slow_sockets_do_not_keep_a_normal_client_waiting_for_their_deadline() {
    // Ten peers (127.0.0.10–19): each past its cap, together past every slot and into the queue.
    let seen = under_attack(200, 10..20, Duration::from_secs(9));
    assert!(seen.answers.get("per_peer_connections").is_some_and(|n| *n > 0), "{seen:?}");
    assert!(seen.answers.get("slow_request_cut").is_some_and(|n| *n > 0), "{seen:?}");
}

#[test]
fn slow_sockets_from_enough_peers_to_fill_the_queue_do_not_keep_a_new_peer_out() {
    // 25 peers at their cap: 400 connections, past the 64 slots and the 256 places in the queue.
    let seen = under_attack(400, 30..55, Duration::from_secs(9));
    assert!(seen.answers.get("waiting_connections").is_some_and(|n| *n > 0), "{seen:?}");
}

/// A connection cut for room before it sent a single byte is still told why (408
/// `slow_request_cut`), not just closed: the listener's HTTP server closing a connection it
/// read nothing on must not shut the socket before the refusal is written.
#[test]
fn an_idle_connection_cut_for_room_is_told_why() {
    let _one = ONE_ATTACK_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let gateway = gateway();
    // Every slot taken by idle connections, 16 (the per-peer cap) from each of four peers.
    let idle: Vec<TcpStream> =
        (0..64).map(|n| connect_from(30 + (n / MAX_PER_PEER) as u8, gateway.address).expect("connect")).collect();
    // Past their grace, with nothing received, every one of them is a slow reader.
    std::thread::sleep(Duration::from_millis(1500));
    let (status, raw, took) = normal_client(&gateway, 40);
    assert_eq!(status, 200, "the waiting client is served: {raw:?} after {took:?}");
    let mut told = None;
    for mut stream in idle {
        let (status, raw) = answer(&mut stream, Duration::from_millis(200));
        if status != 0 {
            told = Some((status, raw));
            break;
        }
    }
    let (status, raw) = told.expect("a cut connection got an answer");
    assert_eq!(status, 408, "{raw:?}");
    assert!(raw.contains("slow_request_cut"), "the reply names the limit: {raw:?}");
    assert!(!raw.to_ascii_lowercase().contains("retry-after"), "no Retry-After on a 408: {raw:?}");
}

/// What hyper's parser refuses, as the hand-written listener did: a head over 64 KiB or with
/// more than 128 fields (431), bytes that are not HTTP (400); and what the gateway refuses
/// before reading a body: a chunked one (411), two lengths that disagree (400). The twin: a
/// head just within both bounds is served.
#[test]
fn a_head_too_large_or_not_http_and_a_body_not_framed_by_one_length_are_refused() {
    let gateway = gateway();
    let within = format!("X-Pad: {}\r\n", "a".repeat(60 * 1024));
    let many: String = (0..130).map(|n| format!("X-Field-{n}: v\r\n")).collect();
    let fields: String = (0..100).map(|n| format!("X-Field-{n}: v\r\n")).collect();
    let post = |extra: &str, body: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nX-Agent: normal\r\nContent-Type: application/json\r\n{extra}\r\n{body}",
            gateway.address
        )
    };
    let framed = |extra: &str| post(&format!("{extra}Content-Length: {}\r\n", PING.len()), PING);
    let cases: Vec<(String, String, u16)> = vec![
        ("a 70 KiB head".into(), framed(&format!("X-Pad: {}\r\n", "a".repeat(70 * 1024))), 431),
        ("130 fields".into(), framed(&many), 431),
        ("not HTTP".into(), "\u{1}\u{2} nonsense\r\n\r\n".into(), 400),
        (
            "chunked".into(),
            post("Transfer-Encoding: chunked\r\n", &format!("{:x}\r\n{PING}\r\n0\r\n\r\n", PING.len())),
            411,
        ),
        ("two lengths".into(), post(&format!("Content-Length: {}\r\nContent-Length: 3\r\n", PING.len()), PING), 400),
        ("a 60 KiB head".into(), framed(&within), 200),
        ("100 fields".into(), framed(&fields), 200),
    ];
    for (what, request, expected) in cases {
        let mut stream = connect_from(6, gateway.address).expect("connect");
        let _ = stream.write_all(request.as_bytes());
        let (status, raw) = answer(&mut stream, Duration::from_secs(5));
        assert_eq!(status, expected, "{what}: {raw:?}");
    }
}
