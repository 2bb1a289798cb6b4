//! kafka-console-consumer.sh (or kafka-console-share-consumer.sh) in a
//! group, in the background, printing the
//! partition, offset, key and value of each record to a file, and the check
//! that a set of consumers read every record of a topic.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::ottla::Ottla;
use crate::tools::kafka_tool_command;

/// One printed record: partition, offset, value.
pub type Record = (i32, i64, String);
/// One record a share consumer printed: partition, offset, delivery
/// count, value.
pub type ShareRecord = (i32, i64, u32, String);

pub struct ConsoleConsumer {
    child: Option<Child>,
    out: PathBuf,
}

impl ConsoleConsumer {
    /// Starts a consumer of `topic` in `group`, from the beginning, with
    /// `props` as consumer properties; its output goes to `<name>.out` in
    /// the node's data dir.
    pub fn start(node: &Ottla, name: &str, topic: &str, group: &str, props: &[&str]) -> Self {
        let mut args = vec!["--from-beginning"];
        args.extend(props.iter().flat_map(|p| ["--consumer-property", p]));
        Self::spawn(node, name, "kafka-console-consumer.sh", topic, group, &args)
    }

    /// Starts kafka-console-share-consumer.sh in share group `group` (its
    /// lines also carry each record's delivery count, see
    /// [`ConsoleConsumer::share_records`]), with `args` added (`--release`,
    /// `--reject`, ...).
    pub fn start_share(node: &Ottla, name: &str, topic: &str, group: &str, args: &[&str]) -> Self {
        let mut all = vec!["--formatter-property", "print.delivery=true"];
        all.extend_from_slice(args);
        Self::spawn(
            node,
            name,
            "kafka-console-share-consumer.sh",
            topic,
            group,
            &all,
        )
    }

    fn spawn(
        node: &Ottla,
        name: &str,
        script: &str,
        topic: &str,
        group: &str,
        args: &[&str],
    ) -> Self {
        let out = node.data_dir.join(format!("{name}.out"));
        let err = node.data_dir.join(format!("{name}.err"));
        let child = kafka_tool_command(script)
            .args([
                "--bootstrap-server",
                &node.bootstrap(),
                "--topic",
                topic,
                "--group",
                group,
                "--formatter-property",
                "print.partition=true",
                "--formatter-property",
                "print.offset=true",
                "--formatter-property",
                "print.key=true",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {script}: {e}"));
        Self {
            child: Some(child),
            out,
        }
    }

    /// Every complete line printed so far.
    pub fn records(&self) -> Vec<Record> {
        self.share_records()
            .into_iter()
            .map(|(p, o, _, v)| (p, o, v))
            .collect()
    }

    /// Every complete line a share consumer printed so far, with the
    /// record's delivery count (1 for a plain consumer's lines).
    pub fn share_records(&self) -> Vec<ShareRecord> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let mut fields = line.split('\t').peekable();
                let partition = fields.next()?.strip_prefix("Partition:")?.parse().ok()?;
                let offset = fields.next()?.strip_prefix("Offset:")?.parse().ok()?;
                let delivery = match fields.peek()?.strip_prefix("Delivery:") {
                    Some(d) => {
                        let d = d.parse().ok()?;
                        fields.next();
                        d
                    }
                    None => 1,
                };
                let _key = fields.next()?;
                let value = fields.next()?.to_string();
                Some((partition, offset, delivery, value))
            })
            .collect()
    }

    /// SIGKILL: the JVM gets no chance to commit or leave.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM: the console consumer commits and leaves the group.
    pub fn stop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while c.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(30) {
                c.kill().unwrap();
                panic!("the console consumer ignored SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ConsoleConsumer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Each offset read, with its value and how many times it was read. Fails
/// unless every offset below each partition's end in `ends` was read, and
/// each with one value.
pub fn every_offset_read(
    ends: &BTreeMap<i32, i64>,
    records: &[Record],
) -> BTreeMap<(i32, i64), (String, usize)> {
    let mut seen: BTreeMap<(i32, i64), (String, usize)> = BTreeMap::new();
    for (p, o, v) in records {
        let e = seen.entry((*p, *o)).or_insert_with(|| (v.clone(), 0));
        assert_eq!(&e.0, v, "partition {p} offset {o} read with two values");
        e.1 += 1;
    }
    for (&p, &end) in ends {
        for o in 0..end {
            assert!(
                seen.contains_key(&(p, o)),
                "partition {p} offset {o} was never consumed"
            );
        }
    }
    seen
}
