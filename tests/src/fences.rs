//! The active controller's fences, read back from the nodes' logs, and
//! which of them no fault explains: a broker fenced while nothing was done
//! to it is a false positive of failure detection (issue 27 asks for none).

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::faults::FaultCluster;
use crate::nemesis::FaultRecord;

/// The line the active controller logs once a fence is committed.
const FENCE_LINE: &str = "brokers fenced";

/// How long after a fault's recovery a fence of its victim still counts as
/// caused by it: the controller may commit the fence of a stopped broker's
/// old session while the ISR check that ends the fault already ran.
const AFTER_RECOVERY_SECS: f64 = 1.0;

/// One committed fence of one broker.
#[derive(Debug, Clone, PartialEq)]
pub struct Fence {
    /// Seconds since the Unix epoch, from the log line's timestamp.
    pub at: f64,
    pub broker: i32,
    /// The reason as logged.
    pub reason: String,
}

/// Every fence the active controllers of `cluster` committed, from every
/// node's log (across its restarts), in time order.
pub fn fences_of(cluster: &FaultCluster) -> Vec<Fence> {
    let mut fences: Vec<Fence> = cluster
        .nodes
        .iter()
        .flat_map(|node| fences_in_log(&node.log()))
        .collect();
    fences.sort_by(|a, b| a.at.total_cmp(&b.at));
    fences
}

/// Every fence in a node's log (one line may fence several brokers).
fn fences_in_log(log: &str) -> Vec<Fence> {
    log.lines().filter_map(parse_fence_line).flatten().collect()
}

/// `2026-12-04T22:01:09.880287Z  WARN ...: brokers fenced brokers=[2, 3] reason=...`
fn parse_fence_line(line: &str) -> Option<Vec<Fence>> {
    if !line.contains(FENCE_LINE) {
        return None;
    }
    let timestamp = line.split_whitespace().next()?;
    let at = OffsetDateTime::parse(timestamp, &Rfc3339).ok()?;
    let at = at.unix_timestamp_nanos() as f64 / 1e9;
    let (_, brokers) = line.split_once("brokers=[")?;
    let (brokers, rest) = brokers.split_once(']')?;
    let reason = rest
        .split_once("reason=")
        .map_or("", |(_, r)| r)
        .trim()
        .to_string();
    brokers
        .split(',')
        .map(|b| {
            Some(Fence {
                at,
                broker: b.trim().parse().ok()?,
                reason: reason.clone(),
            })
        })
        .collect()
}

/// The fences no fault explains: a fence of broker `b` is explained by a
/// fault with `b` among its victims, from its injection until shortly after
/// every ISR was full again.
pub fn unexplained<'a>(fences: &'a [Fence], faults: &[FaultRecord]) -> Vec<&'a Fence> {
    fences
        .iter()
        .filter(|fence| {
            !faults.iter().any(|f| {
                f.victims.contains(&fence.broker)
                    && fence.at >= f.injected_at
                    && fence.at <= f.recovered_at + AFTER_RECOVERY_SECS
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::FaultKind;

    const LINE: &str = "2026-12-04T22:01:09.500000Z  WARN listener{listener=CONTROLLER}: \
        ottla_controller::active: brokers fenced brokers=[2, 3] reason=no heartbeat within \
        broker.session.timeout.ms (stopped, cut off or overloaded)";

    #[test]
    fn a_fence_line_names_each_broker_with_its_time_and_reason() {
        let log = format!("2026-12-04T22:01:09.1Z  INFO x: broker unfenced broker=2\n{LINE}\n");
        let fences = fences_in_log(&log);
        assert_eq!(fences.len(), 2);
        assert_eq!(fences[0].broker, 2);
        assert_eq!(fences[1].broker, 3);
        assert_eq!(fences[0].at, 1_796_421_669.5);
        assert!(
            fences[0].reason.starts_with("no heartbeat"),
            "{:?}",
            fences[0]
        );
    }

    #[test]
    fn only_a_fault_on_the_fenced_broker_at_that_time_explains_a_fence() {
        let fence = |broker, at| Fence {
            at,
            broker,
            reason: String::new(),
        };
        let fault = FaultRecord {
            kind: FaultKind::Freeze,
            victims: vec![2],
            injected_at: 100.0,
            victims_out_at: Some(102.5),
            heal_began_at: 103.0,
            recovered_at: 105.0,
        };
        let fences = [
            fence(2, 103.0),
            fence(2, 105.5),
            fence(3, 103.0),
            fence(2, 99.0),
            fence(2, 107.0),
        ];
        let unexplained = unexplained(&fences, &[fault]);
        assert_eq!(
            unexplained
                .iter()
                .map(|f| (f.broker, f.at))
                .collect::<Vec<_>>(),
            [(3, 103.0), (2, 99.0), (2, 107.0)]
        );
    }
}
