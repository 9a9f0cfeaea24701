//! Who gets one of the listener's connection slots, in what order, and how long a request may
//! take to arrive once it has one. A connection counts against its peer from accept to close;
//! it waits for a slot in a queue (fewest slots held by its peer first, then first come); once
//! it holds a slot its head and then its body must arrive within a deadline each (an `Instant`,
//! not a per-read timeout a trickled byte resets). While connections wait and every slot is
//! taken, a connection still reading its request, slower than `MIN_RATE` after `GRACE`, is cut
//! to make room — the longest-held first — so slow clients hold slots only while nobody waits.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Connections holding a slot at once: reading their request, or being served.
pub const MAX_CONNECTIONS: usize = 64;
/// Connections from one peer (an IPv4 address, or an IPv6 /64), holding a slot or waiting for
/// one; the next gets 429.
pub const MAX_PER_PEER: usize = 16;
/// Connections waiting for a slot; the next gets 503 at once.
pub const MAX_WAITING: usize = 256;
/// The longest a connection waits for a slot; then 503.
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);
/// From the slot to the end of the request head; then 408.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(10);
/// From the end of the head to the end of the body: this, plus the body's declared length at
/// `MIN_RATE`; then 408.
pub const BODY_DEADLINE: Duration = Duration::from_secs(10);
/// Bytes per second a request must average while others wait for a slot (after `GRACE`), and
/// the rate a body's deadline allows beyond `BODY_DEADLINE`.
pub const MIN_RATE: u64 = 64 * 1024;
/// How long a connection may read its request, however slowly, before it can be cut for room.
pub const GRACE: Duration = Duration::from_secs(1);
/// How often a waiting connection looks again (a slot freed wakes it at once).
const TICK: Duration = Duration::from_millis(50);
/// At most one log line about refused connections per this long (the counts since the last).
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// A limit a connection hit; the reply names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The peer already holds this many connections (the cap in force).
    PerPeer(usize),
    Waiting,
    Displaced,
    QueueWait,
    Head,
    Body,
    Cut,
}

impl Limit {
    pub fn status(self) -> u16 {
        match self {
            Limit::PerPeer(_) => 429,
            Limit::Waiting | Limit::Displaced | Limit::QueueWait => 503,
            Limit::Head | Limit::Body | Limit::Cut => 408,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Limit::PerPeer(_) => "per_peer_connections",
            Limit::Waiting => "waiting_connections",
            Limit::Displaced => "displaced_from_queue",
            Limit::QueueWait => "queue_wait",
            Limit::Head => "head_deadline",
            Limit::Body => "body_deadline",
            Limit::Cut => "slow_request_cut",
        }
    }

    pub fn message(self) -> String {
        match self {
            Limit::PerPeer(cap) => format!(
                "this peer already has {cap} connections open to the gateway (--max-connections-per-peer; behind a proxy every client is the proxy)"
            ),
            Limit::Waiting => format!(
                "{MAX_CONNECTIONS} connections are being served and {MAX_WAITING} are waiting, none from a peer with more connections than this one"
            ),
            Limit::Displaced => format!(
                "{MAX_WAITING} connections were waiting and this peer had the most of them: a newer peer took this place"
            ),
            Limit::QueueWait => format!("no connection slot came free within {} s", QUEUE_WAIT.as_secs()),
            Limit::Head => format!("the request head did not arrive within {} s", HEAD_DEADLINE.as_secs()),
            Limit::Body => format!(
                "the request body did not arrive within {} s plus its length at {} KiB/s",
                BODY_DEADLINE.as_secs(),
                MIN_RATE / 1024
            ),
            Limit::Cut => format!(
                "every slot was taken and others waited; this request arrived slower than {} KiB/s",
                MIN_RATE / 1024
            ),
        }
    }

    /// Seconds a refused client should wait before trying again, when trying again may help.
    pub fn retry_after(self) -> Option<u64> {
        matches!(self, Limit::PerPeer(_) | Limit::Waiting | Limit::Displaced | Limit::QueueWait).then_some(1)
    }
}

/// The peer a connection counts against: an IPv4 address (IPv4-mapped IPv6 included), or the
/// /64 of an IPv6 address (one host is commonly given a whole /64).
pub fn peer_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

pub struct Gate {
    /// Connections one peer may hold at once (`--max-connections-per-peer`).
    per_peer: usize,
    state: Mutex<State>,
    changed: Condvar,
    tally: Mutex<Tally>,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate::new(MAX_PER_PEER)
    }
}

/// Refusals since the last log line, and when that was.
#[derive(Default)]
struct Tally {
    logged: Option<Instant>,
    counts: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// Count one refusal; the line to log when none was logged within `LOG_EVERY`.
    fn count(&mut self, limit: Limit, now: Instant) -> Option<String> {
        *self.counts.entry(limit.name()).or_default() += 1;
        if self.logged.is_some_and(|last| now.saturating_duration_since(last) < LOG_EVERY) {
            return None;
        }
        self.logged = Some(now);
        let counts: Vec<String> = self.counts.iter().map(|(name, n)| format!("{name} {n}")).collect();
        self.counts.clear();
        Some(format!("connections refused at the listener's limits (docs/GATEWAY.md): {}", counts.join(", ")))
    }
}

#[derive(Default)]
struct State {
    /// Slots taken.
    holding: usize,
    next_ticket: u64,
    /// Tickets waiting for a slot, in arrival order.
    waiting: Vec<(u64, IpAddr)>,
    peers: HashMap<IpAddr, Peer>,
    /// Slot holders still reading their request, in the order they got their slot.
    reading: Vec<Reading>,
    /// Of those, how many were cut and have not yet given their slot back.
    cutting: usize,
    /// Waiters taken out of a full queue for a newcomer, not yet told.
    displaced: Vec<u64>,
}

#[derive(Default)]
struct Peer {
    admitted: usize,
    holding: usize,
}

struct Reading {
    ticket: u64,
    since: Instant,
    received: Arc<AtomicU64>,
    socket: TcpStream,
    cut: Arc<AtomicBool>,
}

impl Gate {
    /// A gate letting one peer hold `per_peer` connections (1 to `MAX_CONNECTIONS`).
    pub fn new(per_peer: usize) -> Gate {
        Gate {
            per_peer: per_peer.clamp(1, MAX_CONNECTIONS),
            state: Mutex::default(),
            changed: Condvar::new(),
            tally: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Log a refusal, at most one line per `LOG_EVERY` (an attack costs a line, not a flood).
    pub fn note(&self, limit: Limit) {
        let line = self.tally.lock().unwrap_or_else(PoisonError::into_inner).count(limit, Instant::now());
        if let Some(line) = line {
            super::log::warn(&line);
        }
    }

    /// Count a new connection against its peer and queue it, or say which limit it hit.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admission, Limit> {
        let peer = peer_of(ip);
        let mut state = self.lock();
        if state.peers.get(&peer).is_some_and(|p| p.admitted >= self.per_peer) {
            return Err(Limit::PerPeer(self.per_peer));
        }
        if state.waiting.len() >= MAX_WAITING + MAX_CONNECTIONS.saturating_sub(state.holding) {
            // The queue is full: the newcomer takes the place of the youngest waiter of the peer
            // with the most connections, if that peer has more than the newcomer's would have.
            let mine = state.peers.get(&peer).map_or(0, |p| p.admitted) + 1;
            let admitted = |ip: &IpAddr| state.peers.get(ip).map_or(0, |p| p.admitted);
            let crowded = state.waiting.iter().enumerate().max_by_key(|(_, (_, ip))| admitted(ip));
            match crowded.map(|(at, (ticket, ip))| (at, *ticket, admitted(ip))) {
                Some((at, ticket, theirs)) if theirs > mine => {
                    state.waiting.remove(at);
                    state.displaced.push(ticket);
                    self.changed.notify_all();
                }
                _ => return Err(Limit::Waiting),
            }
        }
        state.peers.entry(peer).or_default().admitted += 1;
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push((ticket, peer));
        Ok(Admission { gate: Arc::clone(self), ticket, peer, slot: false })
    }
}

impl State {
    /// The waiter served next: the one whose peer holds the fewest slots, the oldest of those.
    fn next_in_line(&self) -> Option<u64> {
        self.waiting
            .iter()
            .min_by_key(|(ticket, peer)| (self.peers.get(peer).map_or(0, |p| p.holding), *ticket))
            .map(|(ticket, _)| *ticket)
    }

    /// Cut as many slow request readers as the waiters lack slots (counting those already cut).
    fn make_room(&mut self, now: Instant) {
        let free = MAX_CONNECTIONS.saturating_sub(self.holding);
        let mut short = self.waiting.len().saturating_sub(free + self.cutting);
        for reading in &self.reading {
            if short == 0 {
                break;
            }
            let held = now.saturating_duration_since(reading.since);
            if reading.cut.load(Ordering::SeqCst) || held < GRACE {
                continue;
            }
            let owed = (MIN_RATE as f64 * held.as_secs_f64()) as u64;
            if reading.received.load(Ordering::SeqCst) >= owed {
                continue;
            }
            reading.cut.store(true, Ordering::SeqCst);
            // Its blocked read returns at once; the reply (408) can still be written.
            let _ = reading.socket.shutdown(Shutdown::Read);
            self.cutting += 1;
            short -= 1;
        }
    }

    /// No longer a candidate for a cut; whether it was cut already.
    fn stop_reading(&mut self, ticket: u64) -> bool {
        let Some(at) = self.reading.iter().position(|r| r.ticket == ticket) else { return false };
        let reading = self.reading.remove(at);
        let cut = reading.cut.load(Ordering::SeqCst);
        if cut {
            self.cutting = self.cutting.saturating_sub(1);
        }
        cut
    }
}

/// One admitted connection: counted against its peer until dropped, and holding a slot once
/// `wait` returned `Ok`.
pub struct Admission {
    gate: Arc<Gate>,
    ticket: u64,
    peer: IpAddr,
    slot: bool,
}

impl Admission {
    /// Wait (at most `QUEUE_WAIT`) for a slot. `socket`, `received` (the bytes of the request
    /// read so far) and `cut` (set when it is cut for room) let the gate cut this connection
    /// while it reads its request.
    pub fn wait(&mut self, socket: &TcpStream, received: Arc<AtomicU64>, cut: Arc<AtomicBool>) -> Result<(), Limit> {
        let until = Instant::now() + QUEUE_WAIT;
        let gate = Arc::clone(&self.gate);
        let mut state = gate.lock();
        loop {
            if let Some(at) = state.displaced.iter().position(|ticket| *ticket == self.ticket) {
                state.displaced.swap_remove(at);
                return Err(Limit::Displaced);
            }
            if state.holding < MAX_CONNECTIONS && state.next_in_line() == Some(self.ticket) {
                state.waiting.retain(|(ticket, _)| *ticket != self.ticket);
                state.holding += 1;
                state.peers.entry(self.peer).or_default().holding += 1;
                self.slot = true;
                if let Ok(socket) = socket.try_clone() {
                    let since = Instant::now();
                    state.reading.push(Reading { ticket: self.ticket, since, received, socket, cut });
                }
                // Another slot may be free for the next in line.
                gate.changed.notify_all();
                return Ok(());
            }
            let now = Instant::now();
            if now >= until {
                state.waiting.retain(|(ticket, _)| *ticket != self.ticket);
                gate.changed.notify_all();
                return Err(Limit::QueueWait);
            }
            state.make_room(now);
            let pause = TICK.min(until - now);
            state = gate.changed.wait_timeout(state, pause).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    pub fn note(&self, limit: Limit) {
        self.gate.note(limit);
    }

    /// The request is read whole: from now on the connection is being served, never cut. `false`
    /// when it was cut before that (its socket is then shut for reading, so it must not be
    /// served: the listener would take the client for gone).
    #[must_use]
    pub fn request_read(&self) -> bool {
        !self.gate.lock().stop_reading(self.ticket)
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.waiting.retain(|(ticket, _)| *ticket != self.ticket);
        state.displaced.retain(|ticket| *ticket != self.ticket);
        state.stop_reading(self.ticket);
        if self.slot {
            state.holding = state.holding.saturating_sub(1);
        }
        if let Some(peer) = state.peers.get_mut(&self.peer) {
            if self.slot {
                peer.holding = peer.holding.saturating_sub(1);
            }
            peer.admitted = peer.admitted.saturating_sub(1);
            if peer.admitted == 0 {
                state.peers.remove(&self.peer);
            }
        }
        self.gate.changed.notify_all();
    }
}

/// How long a body of `length` bytes may take once the head has arrived.
pub fn body_deadline(length: usize) -> Duration {
    BODY_DEADLINE + Duration::from_millis((length as u64).saturating_mul(1000) / MIN_RATE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn an_ipv6_peer_is_its_64_and_a_mapped_ipv4_is_the_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(peer_of(a), peer_of(b));
        assert_eq!(peer_of(a), IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 0)));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(peer_of(mapped), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)));
    }

    #[test]
    fn the_per_peer_cap_and_the_queue_bound_refuse_at_admission() {
        let gate = Arc::new(Gate::default());
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let held: Vec<Admission> = (0..MAX_PER_PEER).map(|_| gate.admit(one).expect("admitted")).collect();
        assert_eq!(gate.admit(one).err(), Some(Limit::PerPeer(MAX_PER_PEER)));
        assert!(gate.admit("10.0.0.2".parse().unwrap()).is_ok());
        drop(held);
        assert!(gate.admit(one).is_ok(), "a peer's count falls as its connections close");
    }

    #[test]
    fn the_per_peer_cap_is_the_one_given_at_its_instant_and_one_past_and_stays_within_the_slots() {
        for (given, cap) in
            [(1, 1), (2, 2), (MAX_CONNECTIONS, MAX_CONNECTIONS), (0, 1), (MAX_CONNECTIONS + 1, MAX_CONNECTIONS)]
        {
            let gate = Arc::new(Gate::new(given));
            let one: IpAddr = "10.0.0.1".parse().unwrap();
            let held: Vec<Admission> = (0..cap).map(|_| gate.admit(one).expect("admitted")).collect();
            assert_eq!(gate.admit(one).err(), Some(Limit::PerPeer(cap)), "given {given}");
            assert!(Limit::PerPeer(cap).message().contains(&format!("already has {cap} connections")));
            drop(held);
        }
    }

    #[test]
    fn a_full_queue_takes_a_newcomer_in_place_of_the_most_crowded_peers_youngest_waiter() {
        let gate = Arc::new(Gate::default());
        gate.lock().holding = MAX_CONNECTIONS;
        let peers = MAX_WAITING / MAX_PER_PEER;
        let mut held = Vec::new();
        for peer in 0..peers {
            for _ in 0..MAX_PER_PEER {
                held.push(gate.admit(IpAddr::V4(Ipv4Addr::new(10, 0, 1, peer as u8))).expect("admitted"));
            }
        }
        assert_eq!(gate.lock().waiting.len(), MAX_WAITING);
        let youngest = held.last().map(|a| a.ticket);
        let newcomer = gate.admit("10.0.2.1".parse().unwrap()).expect("a new peer gets a place");
        assert_eq!(gate.lock().displaced.first().copied(), youngest);
        assert_eq!(gate.lock().waiting.len(), MAX_WAITING);
        assert_eq!(
            gate.admit("10.0.1.0".parse().unwrap()).err(),
            Some(Limit::PerPeer(MAX_PER_PEER)),
            "a peer at its cap is refused before the queue is looked at"
        );
        // A peer with as many connections as any in the queue takes no one's place.
        let mut second: Vec<Admission> = Vec::new();
        for _ in 1..MAX_PER_PEER {
            match gate.admit("10.0.2.1".parse().unwrap()) {
                Ok(admission) => second.push(admission),
                Err(limit) => {
                    assert_eq!(limit, Limit::Waiting);
                    break;
                }
            }
        }
        assert!(second.len() < MAX_PER_PEER - 1, "the newcomer's peer stops displacing once it is as crowded");
        drop((newcomer, second));
    }

    #[test]
    fn the_next_slot_goes_to_the_peer_holding_fewest_then_to_the_oldest() {
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut state = State::default();
        state.peers.insert(a, Peer { admitted: 5, holding: 3 });
        state.peers.insert(b, Peer { admitted: 2, holding: 0 });
        state.waiting = vec![(4, a), (5, a), (6, b), (7, b)];
        assert_eq!(state.next_in_line(), Some(6));
        state.peers.insert(b, Peer { admitted: 2, holding: 3 });
        assert_eq!(state.next_in_line(), Some(4), "equal holdings: first come");
    }

    #[test]
    fn only_slow_request_readers_past_the_grace_are_cut_and_only_as_many_as_are_short() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let mut state = State { holding: MAX_CONNECTIONS, ..State::default() };
        // `now` is ten seconds ahead, so that a slot held for `held` seconds began at `base + 10 - held`.
        let base = Instant::now();
        let now = base + Duration::from_secs(10);
        let mut clients = Vec::new();
        let mut cuts = Vec::new();
        // Oldest first: slow and old, fast and old, slow but young, slow and old.
        for (ticket, held, received) in [(0, 5, 10), (1, 5, 10 * MIN_RATE), (2, 0, 0), (3, 3, 0)] {
            clients.push(TcpStream::connect(address).unwrap());
            let (socket, _) = listener.accept().unwrap();
            let cut = Arc::new(AtomicBool::new(false));
            cuts.push(Arc::clone(&cut));
            let since = base + Duration::from_secs(10 - held);
            state.reading.push(Reading { ticket, since, received: Arc::new(AtomicU64::new(received)), socket, cut });
        }
        state.waiting = vec![(9, "10.0.0.9".parse().unwrap())];
        state.make_room(now);
        let cut: Vec<bool> = cuts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        assert_eq!(cut, [true, false, false, false], "one waiter: the longest-held slow reader only");
        state.make_room(now);
        assert_eq!(state.cutting, 1, "a cut not yet given back counts as room on its way");
        state.waiting.push((10, "10.0.0.9".parse().unwrap()));
        state.waiting.push((11, "10.0.0.9".parse().unwrap()));
        state.make_room(now);
        let cut: Vec<bool> = cuts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        assert_eq!(cut, [true, false, false, true], "never the fast one, never the young one");
        assert_eq!(state.cutting, 2);
        // A cut reader's blocked read ends at once (no byte ever came from its client).
        let mut probe = [0u8; 1];
        state.reading[0].socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let started = Instant::now();
        assert_eq!((&state.reading[0].socket).read(&mut probe).unwrap(), 0);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(state.stop_reading(0), "it was cut");
        assert_eq!(state.cutting, 1, "given back");
        assert!(!state.stop_reading(1), "it was not");
        drop(clients);
    }

    #[test]
    fn refusals_are_logged_at_most_once_per_window_with_the_counts_since_the_last_line() {
        let mut tally = Tally::default();
        let start = Instant::now();
        let first = tally.count(Limit::PerPeer(MAX_PER_PEER), start).expect("the first is logged");
        assert!(first.ends_with("per_peer_connections 1"), "{first}");
        assert_eq!(tally.count(Limit::PerPeer(MAX_PER_PEER), start + Duration::from_secs(1)), None);
        assert_eq!(tally.count(Limit::Cut, start + Duration::from_secs(2)), None);
        let next = tally.count(Limit::Cut, start + LOG_EVERY).expect("a window later");
        assert!(next.ends_with("per_peer_connections 1, slow_request_cut 2"), "{next}");
    }

    #[test]
    fn a_body_deadline_grows_with_the_length_at_the_minimum_rate() {
        assert_eq!(body_deadline(0), BODY_DEADLINE);
        assert_eq!(body_deadline(MIN_RATE as usize * 3), BODY_DEADLINE + Duration::from_secs(3));
    }
}
