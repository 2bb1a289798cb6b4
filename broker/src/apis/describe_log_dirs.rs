//! DescribeLogDirs (v1-4): per log dir, the hosted partitions (all, or the
//! requested ones) with their sizes, and from v4 the volume's total and
//! usable bytes. An offline dir answers KAFKA_STORAGE_ERROR, as in Kafka.

use std::collections::{BTreeMap, HashSet};
use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    version: i16,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let logs = broker.replicas.logs();
    // Null asks for every partition.
    let wanted: Option<HashSet<(&str, i32)>> = req.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.as_str(), *p)))
            .collect()
    });
    let mut by_dir: BTreeMap<PathBuf, BTreeMap<String, Vec<DescribeLogDirsPartition>>> =
        BTreeMap::new();
    for p in broker.replicas.hosted() {
        if wanted
            .as_ref()
            .is_some_and(|w| !w.contains(&(p.tp.topic.as_str(), p.tp.partition)))
        {
            continue;
        }
        let Some(dir) = logs.log_dir_of(&p.tp) else {
            continue;
        };
        let size = p.log.read().size_bytes();
        // Kafka's lag is the high watermark minus the log end, floored at 0:
        // always 0 while logs are never moved between dirs.
        let partition = DescribeLogDirsPartition::default()
            .with_partition_index(p.tp.partition)
            .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
            .with_offset_lag(0)
            .with_is_future_key(false);
        by_dir
            .entry(dir)
            .or_default()
            .entry(p.tp.topic.clone())
            .or_default()
            .push(partition);
    }
    let offline = logs.offline_dirs();
    let results = logs
        .log_dirs()
        .iter()
        .map(|dir| {
            let path = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            let result = DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_string(path.display().to_string()));
            if offline.contains(dir) {
                return result.with_error_code(ResponseError::KafkaStorageError.code());
            }
            let topics = by_dir
                .remove(dir)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, mut partitions)| {
                    partitions.sort_by_key(|p| p.partition_index);
                    DescribeLogDirsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect();
            let mut result = result.with_topics(topics);
            if version >= 4 {
                // Kafka reports -1 when the volume cannot be measured.
                let (total, usable) = volume_bytes(dir).unwrap_or((-1, -1));
                result = result.with_total_bytes(total).with_usable_bytes(usable);
            }
            result
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

/// The total and usable (unprivileged) bytes of the volume holding `dir`,
/// as Java's FileStore reports them.
fn volume_bytes(dir: &Path) -> Option<(i64, i64)> {
    let path = CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and `stat` is a writable statvfs;
    // it is read only after statvfs reports success.
    let stat = unsafe {
        if libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    // The field widths differ between platforms.
    #[allow(clippy::unnecessary_cast)]
    let (fragment, total, usable) = (
        stat.f_frsize as u64,
        stat.f_blocks as u64,
        stat.f_bavail as u64,
    );
    let bytes = |blocks: u64| i64::try_from(blocks.saturating_mul(fragment)).unwrap_or(i64::MAX);
    Some((bytes(total), bytes(usable)))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    use ottla_protocol::batch::BatchBuilder;
    use ottla_storage::manager::TopicPartition;

    use super::*;
    use crate::apis::test_support::{append, assert_encodes, create_topic, test_broker};

    #[test]
    fn lists_partitions_with_sizes_per_log_dir() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "a", 2);
        create_topic(&broker, "b", 1);
        let now = crate::replica::now_ms();
        append(
            &broker,
            &TopicPartition::new("a", 1),
            &BatchBuilder::default(),
            &[now],
        );
        for version in [1, 4] {
            let r = handle(
                &broker,
                version,
                DescribeLogDirsRequest::default().with_topics(None),
            );
            assert_encodes(&r, version);
            assert_eq!(r.results.len(), 1);
            let d = &r.results[0];
            assert_eq!(d.error_code, 0);
            assert!(Path::new(d.log_dir.as_str()).is_absolute());
            let names: Vec<&str> = d.topics.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, ["a", "b"], "no __cluster_metadata, topics in order");
            let a = &d.topics[0].partitions;
            assert_eq!(
                a.iter().map(|p| p.partition_index).collect::<Vec<_>>(),
                [0, 1]
            );
            assert_eq!(a[0].partition_size, 0);
            assert!(a[1].partition_size > 0);
            assert_eq!((a[1].offset_lag, a[1].is_future_key), (0, false));
            if version == 4 {
                assert!(d.total_bytes > 0 && d.usable_bytes > 0 && d.usable_bytes <= d.total_bytes);
            } else {
                assert_eq!(d.total_bytes, -1);
            }
        }
    }

    #[test]
    fn filters_by_requested_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "a", 2);
        create_topic(&broker, "b", 1);
        let topics = vec![
            DescribableLogDirTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("a")))
                .with_partitions(vec![1, 7]),
            DescribableLogDirTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("nope")))
                .with_partitions(vec![0]),
        ];
        let r = handle(
            &broker,
            2,
            DescribeLogDirsRequest::default().with_topics(Some(topics)),
        );
        assert_encodes(&r, 2);
        let d = &r.results[0];
        assert_eq!(d.topics.len(), 1);
        assert_eq!(d.topics[0].name.as_str(), "a");
        assert_eq!(d.topics[0].partitions.len(), 1);
        assert_eq!(d.topics[0].partitions[0].partition_index, 1);
        let r = handle(
            &broker,
            3,
            DescribeLogDirsRequest::default().with_topics(Some(Vec::new())),
        );
        assert_encodes(&r, 3);
        assert!(r.results[0].topics.is_empty());
    }
}
