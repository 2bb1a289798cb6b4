//! A streams group's member: what it told the coordinator (its metadata
//! record), the tasks it holds and gives up, and its timers.

use std::collections::{BTreeMap, BTreeSet};

use ottla_protocol::streams::describe::Assignment;
use ottla_protocol::streams::records::{
    StreamsGroupCurrentMemberAssignmentValue, StreamsGroupMemberMetadataValue,
};
use ottla_protocol::streams::{TaskIds, TaskOffset};

/// Subtopology id → partitions: one task per partition.
pub type Tasks = BTreeMap<String, BTreeSet<i32>>;

/// Tasks by role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskRoles {
    pub active: Tasks,
    pub standby: Tasks,
    pub warmup: Tasks,
}

/// The wire form of [`Tasks`] (subtopologies and partitions sorted).
pub fn task_ids(tasks: &Tasks) -> Vec<TaskIds> {
    tasks
        .iter()
        .filter(|(_, partitions)| !partitions.is_empty())
        .map(|(id, partitions)| TaskIds {
            subtopology_id: id.clone(),
            partitions: partitions.iter().copied().collect(),
            ..Default::default()
        })
        .collect()
}

pub fn tasks_of(ids: &[TaskIds]) -> Tasks {
    let mut tasks = Tasks::new();
    for t in ids {
        tasks
            .entry(t.subtopology_id.clone())
            .or_default()
            .extend(t.partitions.iter().copied());
    }
    tasks.retain(|_, partitions| !partitions.is_empty());
    tasks
}

/// `a` without the tasks of `b`.
pub fn minus(a: &Tasks, b: &Tasks) -> Tasks {
    let mut out = Tasks::new();
    for (id, partitions) in a {
        let left: BTreeSet<i32> = match b.get(id) {
            Some(other) => partitions.difference(other).copied().collect(),
            None => partitions.clone(),
        };
        if !left.is_empty() {
            out.insert(id.clone(), left);
        }
    }
    out
}

/// The tasks in both.
pub fn intersect(a: &Tasks, b: &Tasks) -> Tasks {
    let mut out = Tasks::new();
    for (id, partitions) in a {
        if let Some(other) = b.get(id) {
            let both: BTreeSet<i32> = partitions.intersection(other).copied().collect();
            if !both.is_empty() {
                out.insert(id.clone(), both);
            }
        }
    }
    out
}

pub fn union(a: &Tasks, b: &Tasks) -> Tasks {
    let mut out = a.clone();
    for (id, partitions) in b {
        out.entry(id.clone()).or_default().extend(partitions);
    }
    out
}

#[cfg(test)]
pub fn contains(tasks: &Tasks, subtopology: &str, partition: i32) -> bool {
    tasks
        .get(subtopology)
        .is_some_and(|p| p.contains(&partition))
}

impl TaskRoles {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }

    pub fn to_wire(&self) -> Assignment {
        Assignment {
            active_tasks: task_ids(&self.active),
            standby_tasks: task_ids(&self.standby),
            warmup_tasks: task_ids(&self.warmup),
            ..Default::default()
        }
    }

    pub fn from_wire(a: &Assignment) -> Self {
        Self {
            active: tasks_of(&a.active_tasks),
            standby: tasks_of(&a.standby_tasks),
            warmup: tasks_of(&a.warmup_tasks),
        }
    }

    /// Each role's tasks combined with `other`'s by `f`.
    pub fn zip(&self, other: &Self, f: impl Fn(&Tasks, &Tasks) -> Tasks) -> Self {
        Self {
            active: f(&self.active, &other.active),
            standby: f(&self.standby, &other.standby),
            warmup: f(&self.warmup, &other.warmup),
        }
    }
}

/// Where a member is in reaching its target (Kafka's MemberState values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemberState {
    /// Holds its target at the target's epoch.
    #[default]
    Stable = 1,
    /// Must confirm it gave up `revoking` before it gets more.
    UnrevokedTasks = 2,
    /// Waits for tasks other members still hold.
    UnreleasedTasks = 3,
}

impl MemberState {
    fn from_i8(v: i8) -> Self {
        match v {
            2 => Self::UnrevokedTasks,
            3 => Self::UnreleasedTasks,
            _ => Self::Stable,
        }
    }
}

/// StreamsGroupCurrentMemberAssignment: the member's epoch and tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    pub assigned: TaskRoles,
    pub revoking: TaskRoles,
}

impl CurrentAssignment {
    pub fn to_wire(&self) -> StreamsGroupCurrentMemberAssignmentValue {
        StreamsGroupCurrentMemberAssignmentValue {
            member_epoch: self.epoch,
            previous_member_epoch: self.previous_epoch,
            state: self.state as i8,
            active_tasks: task_ids(&self.assigned.active),
            standby_tasks: task_ids(&self.assigned.standby),
            warmup_tasks: task_ids(&self.assigned.warmup),
            active_tasks_pending_revocation: task_ids(&self.revoking.active),
            standby_tasks_pending_revocation: task_ids(&self.revoking.standby),
            warmup_tasks_pending_revocation: task_ids(&self.revoking.warmup),
            ..Default::default()
        }
    }

    pub fn from_wire(v: &StreamsGroupCurrentMemberAssignmentValue) -> Self {
        Self {
            epoch: v.member_epoch,
            previous_epoch: v.previous_member_epoch,
            state: MemberState::from_i8(v.state),
            assigned: TaskRoles {
                active: tasks_of(&v.active_tasks),
                standby: tasks_of(&v.standby_tasks),
                warmup: tasks_of(&v.warmup_tasks),
            },
            revoking: TaskRoles {
                active: tasks_of(&v.active_tasks_pending_revocation),
                standby: tasks_of(&v.standby_tasks_pending_revocation),
                warmup: tasks_of(&v.warmup_tasks_pending_revocation),
            },
        }
    }
}

/// Subtopology id → partition → a task's changelog offset sum.
pub type TaskOffsetSums = BTreeMap<String, BTreeMap<i32, i64>>;

/// How far a member's local state stores have read each task's changelogs,
/// and how far those changelogs go, as it last reported them (soft state,
/// as Kafka's: the assignor prefers the members with the most state).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskOffsets {
    pub offsets: TaskOffsetSums,
    pub end_offsets: TaskOffsetSums,
}

impl TaskOffsets {
    /// The reported lists (None: unchanged), refused when one names a task
    /// twice.
    pub fn update(
        &mut self,
        offsets: Option<&[TaskOffset]>,
        end_offsets: Option<&[TaskOffset]>,
    ) -> Result<(), String> {
        if let Some(list) = offsets {
            self.offsets = offset_sums(list)?;
        }
        if let Some(list) = end_offsets {
            self.end_offsets = offset_sums(list)?;
        }
        Ok(())
    }
}

fn offset_sums(list: &[TaskOffset]) -> Result<TaskOffsetSums, String> {
    let mut sums = TaskOffsetSums::new();
    for t in list {
        let partitions = sums.entry(t.subtopology_id.clone()).or_default();
        if partitions.insert(t.partition, t.offset).is_some() {
            return Err(format!(
                "Task offsets contain a duplicate entry for subtopology {} and partition {}.",
                t.subtopology_id, t.partition
            ));
        }
    }
    Ok(sums)
}

/// The wire form of [`TaskOffsetSums`].
pub fn task_offsets(sums: &TaskOffsetSums) -> Vec<TaskOffset> {
    sums.iter()
        .flat_map(|(id, partitions)| {
            partitions.iter().map(|(&partition, &offset)| TaskOffset {
                subtopology_id: id.clone(),
                partition,
                offset,
                ..Default::default()
            })
        })
        .collect()
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsMember {
    pub metadata: StreamsGroupMemberMetadataValue,
    pub current: CurrentAssignment,
    /// What it last reported of its state stores (soft state).
    pub task_offsets: TaskOffsets,
    /// When the member is fenced unless it heartbeats (soft state).
    pub session_deadline: i64,
    /// When the member is fenced unless it has given up its revoked tasks.
    pub rebalance_deadline: Option<i64>,
}
