//! `ottla-loadgen`: a light Kafka load generator, to measure what a broker
//! costs per record without a client JVM competing for the same cores.
//!
//! ```text
//! ottla-loadgen produce --bootstrap HOST:PORT --topic T --record-size S --records R --acks 1|-1|all
//!                       [--records-per-batch K] [--partitions-per-request P] [--inflight N]
//! ottla-loadgen consume --bootstrap HOST:PORT --topic T --records R
//! ```
//!
//! One thread, one blocking connection to the broker that leads every
//! partition of the topic (Metadata v12 finds it; partitions led by several
//! brokers are refused), opened once ListOffsets shows it has taken them
//! all up (a topic just created is listed a moment before). Works against
//! Apache Kafka 4.x and Ottla alike: Produce v9 and Fetch v12 name topics,
//! no topic ids. The wait and the lookups are not timed.
//!
//! `produce` builds its uncompressed v2 batches (K records of S bytes, null
//! keys, default 100 per batch) and its requests (P batches each, for P
//! partitions in turn; default every partition) once, then sends them
//! round-robin over the partitions with up to N requests in flight (default
//! 5, as the Java producer), stamping only the correlation id. It stops
//! once R records are acknowledged (the last request carries what is left);
//! any partition error ends the run. No idempotence: batches carry no
//! producer id.
//!
//! `consume` fetches every partition from offset 0 with the Java consumer's
//! limits (50 MiB per fetch, 1 MiB per partition) in a fetch session
//! (KIP-227; sessionless if the broker keeps none), one fetch in flight, and
//! counts records from batch headers alone. It stops once it has R records,
//! and fails if none arrive for 10 s before that.
//!
//! Prints one JSON line: mode, partitions, requests, records, bytes (of
//! record batches sent or received), seconds (first request to last answer),
//! rec_per_s and mb_per_s (MiB/s). Any failure: a message on stderr and exit
//! code 1 (2 for bad arguments).

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::ResponseError;
use ottla_protocol::batch::{BatchBuilder, BatchError, BatchView, SimpleRecord};

type Result<T> = std::result::Result<T, String>;

const USAGE: &str = "usage:
  ottla-loadgen produce --bootstrap HOST:PORT --topic T --record-size S --records R --acks 1|-1|all
                        [--records-per-batch K] [--partitions-per-request P] [--inflight N]
  ottla-loadgen consume --bootstrap HOST:PORT --topic T --records R";

const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;
const METADATA_VERSION: i16 = 12;
const API_VERSIONS_VERSION: i16 = 3;
const LIST_OFFSETS_VERSION: i16 = 7;
const CLIENT_ID: &str = "ottla-loadgen";

/// The Java producer's request.timeout.ms, which it also sends as the
/// produce timeout.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;
/// The Java consumer's fetch.max.bytes, max.partition.fetch.bytes and
/// fetch.max.wait.ms.
const FETCH_MAX_BYTES: i32 = 50 << 20;
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_WAIT_MS: i32 = 500;
/// A broker silent this long has stopped answering.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a partition may take to be led once Metadata lists it.
const LEADERSHIP_WAIT: Duration = Duration::from_secs(30);
/// A consumer that gets nothing new for this long has read all there is.
const IDLE_LIMIT: Duration = Duration::from_secs(10);
/// Largest answer accepted: the fetch limit plus room for the framing.
const MAX_FRAME: usize = FETCH_MAX_BYTES as usize + (1 << 20);
/// Kafka's default socket.request.max.bytes.
const MAX_REQUEST_BYTES: usize = 100 << 20;
/// The most a record's framing in a batch takes besides its value
/// (attributes, varint deltas and lengths, header count).
const RECORD_FRAMING: usize = 16;
/// Where a request frame (size, api key, version) holds its correlation id.
const CORRELATION_AT: usize = 8;
/// A fetch session epoch that asks for no session (KIP-227's FINAL_EPOCH).
const SESSIONLESS: i32 = -1;

fn main() -> ExitCode {
    let mode = match parse_args(std::env::args().skip(1).collect()) {
        Ok(mode) => mode,
        Err(e) => {
            eprintln!("ottla-loadgen: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = match &mode {
        Mode::Produce(args) => produce(args),
        Mode::Consume(target) => consume(target),
    };
    match outcome {
        Ok(report) => {
            println!("{}", report.json());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ottla-loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------- arguments

enum Mode {
    Produce(ProduceArgs),
    Consume(Target),
}

/// What both modes need: where, which topic, how many records.
struct Target {
    bootstrap: String,
    topic: String,
    records: u64,
}

struct ProduceArgs {
    target: Target,
    record_size: usize,
    acks: i16,
    records_per_batch: usize,
    partitions_per_request: Option<usize>,
    inflight: usize,
}

fn parse_args(args: Vec<String>) -> Result<Mode> {
    let (mode, rest) = args.split_first().ok_or(USAGE)?;
    let mut flags = Flags::parse(rest)?;
    let mode = match mode.as_str() {
        "produce" => Mode::Produce(ProduceArgs {
            target: Target::take(&mut flags)?,
            record_size: flags.required("record-size")?,
            acks: parse_acks(&flags.required::<String>("acks")?)?,
            records_per_batch: flags.positive("records-per-batch")?.unwrap_or(100),
            partitions_per_request: flags.positive("partitions-per-request")?,
            inflight: flags.positive("inflight")?.unwrap_or(5),
        }),
        "consume" => Mode::Consume(Target::take(&mut flags)?),
        "-h" | "--help" => return Err(USAGE.into()),
        other => return Err(format!("unknown mode '{other}'\n{USAGE}")),
    };
    flags.reject_leftovers()?;
    Ok(mode)
}

impl Target {
    fn take(flags: &mut Flags) -> Result<Self> {
        Ok(Self {
            bootstrap: flags.required("bootstrap")?,
            topic: flags.required("topic")?,
            records: flags.positive("records")?.ok_or("--records is required")? as u64,
        })
    }
}

/// acks=0 is refused: without answers nothing is known to be acknowledged.
fn parse_acks(acks: &str) -> Result<i16> {
    match acks {
        "1" => Ok(1),
        "-1" | "all" => Ok(-1),
        _ => Err(format!("--acks must be 1, -1 or all, not '{acks}'")),
    }
}

/// `--name value` pairs not yet taken.
struct Flags(Vec<(String, String)>);

impl Flags {
    fn parse(args: &[String]) -> Result<Self> {
        let mut pairs = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let name = arg
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument '{arg}'\n{USAGE}"))?;
            if name == "help" {
                return Err(USAGE.into());
            }
            let value = it.next().ok_or_else(|| format!("{arg} needs a value"))?;
            pairs.push((name.to_string(), value.clone()));
        }
        Ok(Self(pairs))
    }

    fn optional<T: FromStr>(&mut self, name: &str) -> Result<Option<T>> {
        let Some(at) = self.0.iter().position(|(n, _)| n == name) else {
            return Ok(None);
        };
        let (_, value) = self.0.remove(at);
        value
            .parse()
            .map(Some)
            .map_err(|_| format!("--{name}: '{value}' is not a valid value"))
    }

    fn required<T: FromStr>(&mut self, name: &str) -> Result<T> {
        self.optional(name)?
            .ok_or_else(|| format!("--{name} is required\n{USAGE}"))
    }

    fn positive(&mut self, name: &str) -> Result<Option<usize>> {
        let value: Option<String> = self.optional(name)?;
        value
            .map(|v| {
                NonZeroUsize::from_str(&v)
                    .map(NonZeroUsize::get)
                    .map_err(|_| format!("--{name} needs a whole number above 0, not '{v}'"))
            })
            .transpose()
    }

    fn reject_leftovers(self) -> Result<()> {
        match self.0.first() {
            Some((name, _)) => Err(format!("unknown or repeated option --{name}\n{USAGE}")),
            None => Ok(()),
        }
    }
}

// --------------------------------------------------------------- connection

/// A complete request frame (size, header, body) with correlation id 0,
/// stamped with the real one as it is sent.
fn encode_frame<R: Request>(request: &R, version: i16) -> Result<BytesMut> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header
        .encode(&mut frame, R::header_version(version))
        .and_then(|()| request.encode(&mut frame, version))
        .map_err(|e| format!("encoding a {} v{version} request: {e}", api_name(R::KEY)))?;
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame)
}

fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|()| format!("api key {key}"), |k| format!("{k:?}"))
}

/// One blocking connection; answers come in the order of the requests.
struct Connection {
    stream: TcpStream,
    addr: String,
    correlation_id: i32,
    /// Reused for every answer: the space of an answer whose body has been
    /// dropped is reclaimed for the next.
    inbox: BytesMut,
}

impl Connection {
    fn open(addr: &str) -> Result<Self> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
        let setup = |r: std::io::Result<()>| r.map_err(|e| format!("setting up {addr}: {e}"));
        setup(stream.set_nodelay(true))?;
        setup(stream.set_read_timeout(Some(SOCKET_TIMEOUT)))?;
        setup(stream.set_write_timeout(Some(SOCKET_TIMEOUT)))?;
        Ok(Self {
            stream,
            addr: addr.to_string(),
            correlation_id: 0,
            inbox: BytesMut::new(),
        })
    }

    /// Sends `frame` under the next correlation id and returns that id.
    fn send(&mut self, frame: &mut [u8]) -> Result<i32> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        frame[CORRELATION_AT..CORRELATION_AT + 4]
            .copy_from_slice(&self.correlation_id.to_be_bytes());
        self.stream
            .write_all(frame)
            .map_err(|e| self.io_error("sending a request", &e))?;
        Ok(self.correlation_id)
    }

    /// The body of the answer to `correlation_id`, after its header of
    /// `header_version`.
    fn receive(&mut self, correlation_id: i32, header_version: i16) -> Result<Bytes> {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .map_err(|e| self.io_error("reading an answer", &e))?;
        let size = i32::from_be_bytes(size);
        if size < 4 || size as usize > MAX_FRAME {
            return Err(format!("{} sent an answer of {size} bytes", self.addr));
        }
        self.inbox.clear();
        self.inbox.resize(size as usize, 0);
        self.stream
            .read_exact(&mut self.inbox)
            .map_err(|e| self.io_error("reading an answer", &e))?;
        let mut body = self.inbox.split().freeze();
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| format!("decoding a response header from {}: {e}", self.addr))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "{} answered correlation id {} where {correlation_id} was due",
                self.addr, header.correlation_id
            ));
        }
        Ok(body)
    }

    /// Sends `request` and decodes its answer.
    fn call<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response> {
        let mut frame = encode_frame(request, version)?;
        let correlation_id = self.send(&mut frame)?;
        let body = self.receive(correlation_id, R::Response::header_version(version))?;
        decode(body, R::KEY, version)
    }

    fn io_error(&self, doing: &str, e: &std::io::Error) -> String {
        let what = match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                format!("no progress for {} s", SOCKET_TIMEOUT.as_secs())
            }
            ErrorKind::UnexpectedEof => "the broker closed the connection".to_string(),
            _ => e.to_string(),
        };
        format!("{doing} on {}: {what}", self.addr)
    }
}

fn decode<T: Decodable>(mut body: Bytes, key: i16, version: i16) -> Result<T> {
    T::decode(&mut body, version)
        .map_err(|e| format!("decoding a {} v{version} answer: {e}", api_name(key)))
}

fn error_of(code: i16) -> Option<ResponseError> {
    ResponseError::try_from_code(code)
}

// ----------------------------------------------------------------- metadata

/// A topic's partitions and the address of the one broker leading them.
struct Layout {
    topic: TopicName,
    partitions: Vec<i32>,
    leader: String,
}

/// Asks `bootstrap` which versions it speaks and where `topic` lives.
fn topic_layout(bootstrap: &str, topic: &str) -> Result<Layout> {
    let mut conn = Connection::open(bootstrap)?;
    check_versions(&mut conn)?;
    let topic = TopicName(StrBytes::from_string(topic.to_string()));
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic.clone()))
        ]));
    let metadata = conn.call(METADATA_VERSION, &request)?;
    let found = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref() == Some(&topic))
        .ok_or_else(|| format!("Metadata names no topic '{}'", &*topic))?;
    if let Some(e) = error_of(found.error_code) {
        return Err(format!("topic '{}': {e}", &*topic));
    }
    let mut partitions = Vec::new();
    let mut leaders = Vec::new();
    for p in &found.partitions {
        if let Some(e) = error_of(p.error_code) {
            return Err(format!(
                "partition {} of '{}': {e}",
                p.partition_index, &*topic
            ));
        }
        partitions.push(p.partition_index);
        if !leaders.contains(&p.leader_id.0) {
            leaders.push(p.leader_id.0);
        }
    }
    partitions.sort_unstable();
    let [leader] = leaders[..] else {
        return Err(format!(
            "the partitions of '{}' are led by brokers {leaders:?}: the load generator talks to one",
            &*topic
        ));
    };
    let broker = metadata
        .brokers
        .iter()
        .find(|b| b.node_id.0 == leader)
        .ok_or_else(|| format!("Metadata lists no broker {leader}, the leader"))?;
    Ok(Layout {
        topic,
        partitions,
        leader: format!("{}:{}", &*broker.host, broker.port),
    })
}

/// A connection to the topic's leader once it leads every partition: a
/// topic just created is in Metadata a moment before its leader has taken
/// it up, and a run that met NOT_LEADER_OR_FOLLOWER would fail.
fn connect_to_leader(layout: &Layout) -> Result<Connection> {
    let mut conn = Connection::open(&layout.leader)?;
    let latest = |&partition: &i32| {
        ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_timestamp(-1)
    };
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(layout.topic.clone())
            .with_partitions(layout.partitions.iter().map(latest).collect())]);
    let deadline = Instant::now() + LEADERSHIP_WAIT;
    loop {
        let answer = conn.call(LIST_OFFSETS_VERSION, &request)?;
        let refusal = answer
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find_map(|p| error_of(p.error_code).map(|e| (p.partition_index, e)));
        match refusal {
            None => return Ok(conn),
            Some((_, e)) if e.is_retriable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Some((partition, e)) => {
                return Err(format!(
                    "partition {partition} of '{}' at {}: {e}",
                    &*layout.topic, layout.leader
                ))
            }
        }
    }
}

/// Fails clearly on a broker that does not speak the versions used here.
fn check_versions(conn: &mut Connection) -> Result<()> {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let answer = conn.call(API_VERSIONS_VERSION, &request)?;
    if let Some(e) = error_of(answer.error_code) {
        return Err(format!("ApiVersions: {e}"));
    }
    let needed = [
        (ApiKey::Produce, PRODUCE_VERSION),
        (ApiKey::Fetch, FETCH_VERSION),
        (ApiKey::Metadata, METADATA_VERSION),
        (ApiKey::ListOffsets, LIST_OFFSETS_VERSION),
    ];
    for (key, version) in needed {
        let offered = answer.api_keys.iter().find(|k| k.api_key == key as i16);
        if !offered.is_some_and(|k| (k.min_version..=k.max_version).contains(&version)) {
            return Err(format!("{} does not offer {key:?} v{version}", conn.addr));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ figures

#[derive(Default, Clone, Copy)]
struct Tally {
    records: u64,
    bytes: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Self) {
        self.records += other.records;
        self.bytes += other.bytes;
    }
}

struct Report {
    mode: &'static str,
    partitions: usize,
    requests: u64,
    tally: Tally,
    seconds: f64,
}

impl Report {
    fn json(&self) -> String {
        let Tally { records, bytes } = self.tally;
        format!(
            "{{\"mode\":\"{}\",\"partitions\":{},\"requests\":{},\"records\":{records},\"bytes\":{bytes},\
             \"seconds\":{:.6},\"rec_per_s\":{:.1},\"mb_per_s\":{:.3}}}",
            self.mode,
            self.partitions,
            self.requests,
            self.seconds,
            records as f64 / self.seconds,
            bytes as f64 / (1 << 20) as f64 / self.seconds,
        )
    }
}

// ------------------------------------------------------------------ produce

/// A request encoded once and sent as often as the plan says.
struct PreBuilt {
    frame: BytesMut,
    batches: usize,
    tally: Tally,
}

/// Every request of a run: `full` requests taken in turn from `cycle`,
/// then `tail` with whatever records are left.
struct ProducePlan {
    cycle: Vec<PreBuilt>,
    full: u64,
    tail: Option<PreBuilt>,
}

impl ProducePlan {
    fn new(args: &ProduceArgs, layout: &Layout) -> Result<Self> {
        let partitions = layout.partitions.len();
        let per_request = args.partitions_per_request.unwrap_or(partitions);
        if per_request > partitions {
            return Err(format!(
                "--partitions-per-request {per_request} exceeds the {partitions} partition(s) of the topic"
            ));
        }
        let k = args.records_per_batch;
        // A record takes its value and a few bytes of framing.
        let request_bytes = (args.record_size.saturating_add(RECORD_FRAMING))
            .checked_mul(k)
            .and_then(|batch| batch.checked_mul(per_request));
        if request_bytes.is_none_or(|bytes| bytes > MAX_REQUEST_BYTES) {
            return Err(format!(
                "{per_request} batch(es) of {k} records of {} bytes make a request larger \
                 than the {} MiB a broker accepts",
                args.record_size,
                MAX_REQUEST_BYTES >> 20
            ));
        }
        let requester = Requester {
            args,
            layout,
            batches: Batches::new(k, args.record_size),
        };

        let per_full_request = (k * per_request) as u64;
        let full = args.target.records / per_full_request;
        // Request i starts at partition (i * per_request) mod partitions, so
        // the requests repeat after this many.
        let period = (partitions / gcd(partitions, per_request)) as u64;
        let cycle = (0..period.min(full))
            .map(|i| requester.build(i * per_request as u64, &vec![k; per_request]))
            .collect::<Result<Vec<_>>>()?;
        let left = (args.target.records % per_full_request) as usize;
        let tail_sizes: Vec<usize> = std::iter::repeat_n(k, left / k)
            .chain(Some(left % k).filter(|&r| r > 0))
            .collect();
        let tail = (left > 0)
            .then(|| requester.build(full * per_request as u64, &tail_sizes))
            .transpose()?;
        Ok(Self { cycle, full, tail })
    }

    fn len(&self) -> u64 {
        self.full + u64::from(self.tail.is_some())
    }

    fn request(&mut self, i: u64) -> &mut PreBuilt {
        if i < self.full {
            let period = self.cycle.len() as u64;
            &mut self.cycle[(i % period) as usize]
        } else {
            self.tail
                .as_mut()
                .expect("the plan has a tail past its full requests")
        }
    }
}

/// Record batches of one record size; the usual, full one built once.
struct Batches {
    record_size: usize,
    timestamp: i64,
    full: Bytes,
    full_records: usize,
}

impl Batches {
    fn new(full_records: usize, record_size: usize) -> Self {
        let timestamp = now_ms();
        Self {
            record_size,
            timestamp,
            full: Bytes::from(record_batch(full_records, record_size, timestamp)),
            full_records,
        }
    }

    fn of(&self, records: usize) -> Bytes {
        if records == self.full_records {
            self.full.clone()
        } else {
            Bytes::from(record_batch(records, self.record_size, self.timestamp))
        }
    }
}

/// Encodes the produce requests of a run.
struct Requester<'a> {
    args: &'a ProduceArgs,
    layout: &'a Layout,
    batches: Batches,
}

impl Requester<'_> {
    /// A request of one batch per entry of `sizes` (records each), the
    /// batches numbered from `first_batch` over the partitions in turn.
    fn build(&self, first_batch: u64, sizes: &[usize]) -> Result<PreBuilt> {
        let partitions = &self.layout.partitions;
        let mut tally = Tally::default();
        let partition_data = sizes
            .iter()
            .enumerate()
            .map(|(j, &records)| {
                let batch = self.batches.of(records);
                tally += Tally {
                    records: records as u64,
                    bytes: batch.len() as u64,
                };
                let at = ((first_batch + j as u64) % partitions.len() as u64) as usize;
                PartitionProduceData::default()
                    .with_index(partitions[at])
                    .with_records(Some(batch))
            })
            .collect();
        let request = ProduceRequest::default()
            .with_acks(self.args.acks)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(self.layout.topic.clone())
                .with_partition_data(partition_data)]);
        Ok(PreBuilt {
            frame: encode_frame(&request, PRODUCE_VERSION)?,
            batches: sizes.len(),
            tally,
        })
    }
}

/// An uncompressed v2 batch of `records` records of `size` bytes, null keys.
fn record_batch(records: usize, size: usize, timestamp: i64) -> Vec<u8> {
    let value: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
    let record = SimpleRecord {
        timestamp,
        key: None,
        value: Some(value),
        headers: vec![],
    };
    BatchBuilder::default().build(&vec![record; records])
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn produce(args: &ProduceArgs) -> Result<Report> {
    let layout = topic_layout(&args.target.bootstrap, &args.target.topic)?;
    let mut plan = ProducePlan::new(args, &layout)?;
    let mut conn = connect_to_leader(&layout)?;
    let header_version = ProduceResponse::header_version(PRODUCE_VERSION);
    let mut in_flight: VecDeque<(i32, u64)> = VecDeque::with_capacity(args.inflight);
    let mut acknowledged = Tally::default();
    let start = Instant::now();
    for i in 0..plan.len() {
        if in_flight.len() == args.inflight {
            let (id, sent) = in_flight.pop_front().expect("a full queue");
            acknowledged += settle(&mut conn, id, header_version, plan.request(sent))?;
        }
        let id = conn.send(&mut plan.request(i).frame)?;
        in_flight.push_back((id, i));
    }
    while let Some((id, sent)) = in_flight.pop_front() {
        acknowledged += settle(&mut conn, id, header_version, plan.request(sent))?;
    }
    Ok(Report {
        mode: "produce",
        partitions: layout.partitions.len(),
        requests: plan.len(),
        tally: acknowledged,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Reads the answer to `request`; its records count once every partition
/// in it has answered without error.
fn settle(
    conn: &mut Connection,
    correlation_id: i32,
    header_version: i16,
    request: &PreBuilt,
) -> Result<Tally> {
    let body = conn.receive(correlation_id, header_version)?;
    let answer: ProduceResponse = decode(body, ApiKey::Produce as i16, PRODUCE_VERSION)?;
    let mut answered = 0;
    for topic in &answer.responses {
        for p in &topic.partition_responses {
            if let Some(e) = error_of(p.error_code) {
                let detail = p
                    .error_message
                    .as_deref()
                    .map_or(String::new(), |m| format!(" ({m})"));
                return Err(format!(
                    "produce to partition {} of '{}': {e}{detail}",
                    p.index, &*topic.name
                ));
            }
            answered += 1;
        }
    }
    if answered != request.batches {
        return Err(format!(
            "a produce answer covers {answered} partition(s) of the {} sent",
            request.batches
        ));
    }
    Ok(request.tally)
}

// ------------------------------------------------------------------ consume

/// Where each partition is read next, and the fetch session.
struct FetchState {
    topic: TopicName,
    /// (partition, next offset, offset last sent in the session).
    cursors: Vec<(i32, i64, Option<i64>)>,
    session_id: i32,
    /// 0 opens a session; above, the next incremental fetch; SESSIONLESS
    /// once the broker has declined one.
    session_epoch: i32,
}

impl FetchState {
    fn new(layout: &Layout) -> Self {
        Self {
            topic: layout.topic.clone(),
            cursors: layout.partitions.iter().map(|&p| (p, 0, None)).collect(),
            session_id: 0,
            session_epoch: 0,
        }
    }

    /// A fetch of every partition, or in a session only of those whose
    /// offset the broker does not have yet.
    fn next_request(&mut self) -> FetchRequest {
        let incremental = self.session_epoch > 0;
        let partitions: Vec<FetchPartition> = self
            .cursors
            .iter_mut()
            .filter(|(_, offset, sent)| !incremental || *sent != Some(*offset))
            .map(|(partition, offset, sent)| {
                *sent = Some(*offset);
                FetchPartition::default()
                    .with_partition(*partition)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(PARTITION_MAX_BYTES)
            })
            .collect();
        // An incremental fetch with nothing to change names no topic.
        let topics = if partitions.is_empty() {
            vec![]
        } else {
            vec![FetchTopic::default()
                .with_topic(self.topic.clone())
                .with_partitions(partitions)]
        };
        FetchRequest::default()
            .with_max_wait_ms(FETCH_MAX_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_session_id(self.session_id)
            .with_session_epoch(self.session_epoch)
            .with_topics(topics)
    }

    /// Counts the records of an answer and moves the cursors past them.
    fn absorb(&mut self, answer: &FetchResponse) -> Result<Tally> {
        if let Some(e) = error_of(answer.error_code) {
            return Err(format!("fetch: {e}"));
        }
        self.session_epoch = match (self.session_epoch, answer.session_id) {
            (0, 0) => SESSIONLESS,
            (0, id) => {
                self.session_id = id;
                1
            }
            (SESSIONLESS, _) => SESSIONLESS,
            (epoch, _) => epoch.wrapping_add(1).max(1),
        };
        let mut tally = Tally::default();
        for topic in &answer.responses {
            for p in &topic.partitions {
                if let Some(e) = error_of(p.error_code) {
                    return Err(format!(
                        "fetch from partition {} of '{}': {e}",
                        p.partition_index, &*topic.topic
                    ));
                }
                let Some(records) = &p.records else { continue };
                let (got, next) = count_batches(records)
                    .map_err(|e| format!("partition {}: {e}", p.partition_index))?;
                tally += got;
                if let Some(next) = next {
                    self.advance(p.partition_index, next)?;
                }
            }
        }
        Ok(tally)
    }

    fn advance(&mut self, partition: i32, next: i64) -> Result<()> {
        let cursor = self
            .cursors
            .iter_mut()
            .find(|(p, _, _)| *p == partition)
            .ok_or_else(|| format!("fetch answered partition {partition}, never asked for"))?;
        cursor.1 = next;
        Ok(())
    }
}

/// The records and bytes of the whole batches in `records` (control
/// batches count as bytes only), and the offset after the last of them. A
/// batch cut short at the end is left for the next fetch.
fn count_batches(records: &[u8]) -> Result<(Tally, Option<i64>)> {
    let mut tally = Tally::default();
    let mut next = None;
    let mut rest = records;
    loop {
        let batch = match BatchView::parse(rest) {
            Ok(batch) => batch,
            Err(BatchError::Truncated { .. }) => return Ok((tally, next)),
            Err(e) => return Err(e.to_string()),
        };
        if !batch.is_control() {
            tally.records += batch.record_count().max(0) as u64;
        }
        tally.bytes += batch.size() as u64;
        next = Some(batch.next_offset());
        rest = &rest[batch.size()..];
    }
}

fn consume(target: &Target) -> Result<Report> {
    let layout = topic_layout(&target.bootstrap, &target.topic)?;
    let mut conn = connect_to_leader(&layout)?;
    let mut state = FetchState::new(&layout);
    let mut tally = Tally::default();
    let mut requests = 0;
    let start = Instant::now();
    let mut last_news = start;
    while tally.records < target.records {
        let answer = conn.call(FETCH_VERSION, &state.next_request())?;
        requests += 1;
        let got = state.absorb(&answer)?;
        tally += got;
        if got.records > 0 {
            last_news = Instant::now();
        } else if last_news.elapsed() > IDLE_LIMIT {
            return Err(format!(
                "read {} of {} records, then nothing new for {} s",
                tally.records,
                target.records,
                IDLE_LIMIT.as_secs()
            ));
        }
    }
    Ok(Report {
        mode: "consume",
        partitions: layout.partitions.len(),
        requests,
        tally,
        seconds: start.elapsed().as_secs_f64(),
    })
}
