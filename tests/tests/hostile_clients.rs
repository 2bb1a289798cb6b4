//! A hostile client against a live `ottla` while well-behaved clients work:
//! a flood of connections from one address (held to its
//! `max.connections.per.ip` override), and from another a stream of
//! oversized, truncated, malformed and hostile-length requests. A
//! librdkafka producer (acks=all, idempotent) and consumer run through it
//! and must lose nothing; the broker must stay up with bounded memory.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, ok, python_script};

/// Where the connection flood comes from, and how many it may hold.
const FLOODER: [u8; 4] = [127, 0, 0, 2];
const FLOODER_LIMIT: usize = 200;
const FLOOD_ATTEMPTS: usize = 600;
/// Where the malformed requests come from.
const MANGLER: [u8; 4] = [127, 0, 0, 3];
const RECORDS: usize = 20_000;

/// Produces `n` numbered records (acks=all, idempotent) while a consumer
/// reads the topic; prints delivery errors and distinct values consumed.
const STEADY_CLIENTS: &str = r#"
import sys, threading, time
from confluent_kafka import Consumer, Producer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
errors, seen = [], set()

def consume():
    c = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'steady',
                  'auto.offset.reset': 'earliest'})
    c.subscribe([topic])
    deadline = time.time() + 150
    while len(seen) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.add(int(m.value()))
    c.close()

reader = threading.Thread(target=consume)
reader.start()
p = Producer({'bootstrap.servers': bootstrap, 'acks': 'all',
              'enable.idempotence': True, 'linger.ms': 5})
def report(err, msg):
    if err is not None:
        errors.append(str(err))
for i in range(n):
    while True:
        try:
            p.produce(topic, str(i).encode(), on_delivery=report)
            break
        except BufferError:
            p.poll(0.1)
    p.poll(0)
    if i % 1000 == 0:
        time.sleep(0.5)  # spread the records over ten seconds of flood
left = p.flush(60)
reader.join()
print(f"undelivered={left} errors={len(errors)} consumed={len(seen)}")
print(errors[:5])
"#;

fn connect_from(source: [u8; 4], broker: SocketAddr) -> std::io::Result<std::net::TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(IpAddr::from(source), 0).into())?;
    socket.connect_timeout(&broker.into(), Duration::from_secs(5))?;
    let stream: std::net::TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(stream)
}

/// ApiVersions v0, correlation id 1, null client id.
const API_VERSIONS: [u8; 14] = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];

/// Whether `stream` gets an answer to ApiVersions.
fn answers(stream: &mut std::net::TcpStream) -> bool {
    let mut size = [0u8; 4];
    if stream.write_all(&API_VERSIONS).is_err() || stream.read_exact(&mut size).is_err() {
        return false;
    }
    let mut body = vec![0; u32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).is_ok()
}

/// A request frame: size, then api key, version, correlation id, client id
/// "x" (header v1), a flexible header's empty tags if `flexible`, `body`.
fn frame(key: i16, version: i16, flexible: bool, body: &[u8]) -> Vec<u8> {
    let mut request = Vec::new();
    request.extend_from_slice(&key.to_be_bytes());
    request.extend_from_slice(&version.to_be_bytes());
    request.extend_from_slice(&7i32.to_be_bytes());
    request.extend_from_slice(&[0, 1, b'x']);
    if flexible {
        request.push(0);
    }
    request.extend_from_slice(body);
    let mut out = (request.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&request);
    out
}

/// The hostile requests, each sent on a fresh connection.
fn hostile_requests(round: usize) -> Vec<Vec<u8>> {
    let mut junk: Vec<u8> = (0..512)
        .map(|i| ((i * 31 + round * 7) % 251) as u8)
        .collect();
    junk[..4].copy_from_slice(&508u32.to_be_bytes());
    vec![
        // Over socket.request.max.bytes, and a negative size.
        vec![0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 12],
        vec![0xff, 0xff, 0xff, 0xfe],
        // Metadata claiming 2^31-1 topics (v1) and 2^32-2 (v12, compact).
        frame(3, 1, false, &[0x7f, 0xff, 0xff, 0xff]),
        frame(3, 12, true, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        // Produce v9 claiming 2^31-1 topic entries after an empty txn id.
        frame(
            0,
            9,
            true,
            &[
                0, 0xff, 0xff, 0x00, 0x00, 0x75, 0x30, 0xff, 0xff, 0xff, 0xff, 0x07,
            ],
        ),
        // An unknown API key, and a known one at an unknown version.
        frame(12_345, 0, false, &[]),
        frame(3, 999, false, &[]),
        // 50 MB announced, 1 kB sent, then the client leaves.
        {
            let mut f = (50u32 << 20).to_be_bytes().to_vec();
            f.extend_from_slice(&[0; 1024]);
            f
        },
        // A frame of deterministic junk.
        junk,
    ]
}

/// Sends one hostile request and reads whatever comes back until the
/// broker closes the connection or goes quiet.
fn send_hostile(broker: SocketAddr, request: &[u8]) {
    let Ok(mut stream) = connect_from(MANGLER, broker) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    if stream.write_all(request).is_ok() {
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
    }
}

fn resident_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

#[test]
fn hostile_clients_cannot_disturb_steady_producers_and_consumers() {
    let node = Ottla::start(&[
        (
            "max.connections.per.ip.overrides",
            &format!("127.0.0.2:{FLOODER_LIMIT}"),
        ),
        ("group.initial.rebalance.delay.ms", "0"),
    ]);
    let bootstrap = node.bootstrap();
    let broker: SocketAddr = bootstrap.parse().unwrap();
    ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--create",
            "--topic",
            "steady",
            "--partitions",
            "3",
        ],
        None,
    ));

    // The connection flood: every connection that is answered stays open.
    let held: Vec<std::net::TcpStream> = (0..FLOOD_ATTEMPTS)
        .filter_map(|_| connect_from(FLOODER, broker).ok())
        .filter_map(|mut stream| answers(&mut stream).then_some(stream))
        .collect();
    assert_eq!(
        held.len(),
        FLOODER_LIMIT,
        "the flooding address holds exactly its limit"
    );

    // The request flood, on four threads, until the steady clients are done.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let manglers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
            std::thread::spawn(move || {
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    for request in hostile_requests(round) {
                        send_hostile(broker, &request);
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    round += 1;
                }
            })
        })
        .collect();

    let out = ok(python_script(
        STEADY_CLIENTS,
        &[&bootstrap, "steady", &RECORDS.to_string()],
    ));
    stop.store(true, Ordering::Relaxed);
    for mangler in manglers {
        mangler.join().unwrap();
    }
    let hostile = sent.load(Ordering::Relaxed);
    let rss_mib = resident_kib(node.pid()) / 1024;
    eprintln!("{hostile} hostile requests, broker RSS {rss_mib} MiB, steady clients: {out}");

    assert!(
        out.contains(&format!("undelivered=0 errors=0 consumed={RECORDS}")),
        "{out}"
    );
    assert!(hostile > 400, "only {hostile} hostile requests were sent");
    assert!(node.is_running(), "the broker died:\n{}", node.log());
    assert!(rss_mib < 1024, "the broker holds {rss_mib} MiB");
    // The held connections are still served, and a new one from elsewhere.
    let mut first = held.into_iter().next().unwrap();
    assert!(answers(&mut first));
    let mut fresh = std::net::TcpStream::connect(broker).unwrap();
    fresh
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(answers(&mut fresh));
    let log = node.log();
    assert!(!log.contains("panicked"), "{log}");
    assert!(log.contains("max.connections.per.ip reached"));
}
