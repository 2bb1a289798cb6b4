//! Server-side assignors of consumer groups (`group.consumer.assignors`):
//!
//! - `uniform` (the default): balanced, and sticky: every member keeps the
//!   partitions of its previous target that it still subscribes to, free
//!   partitions go to the least loaded eligible member (most constrained
//!   partitions first), then partitions move one at a time from the most to
//!   the least loaded eligible member until no two eligible members differ
//!   by more than one. With identical subscriptions this is the minimal
//!   movement to an even spread.
//! - `range`: per topic, the subscribed members in member-id order get
//!   consecutive ranges, the first ones one partition more; members with the
//!   same subscriptions get the same partition numbers of every topic.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::consumer_member::Assignment;

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";

/// One member as the assignor sees it.
pub struct MemberSpec<'a> {
    pub id: &'a str,
    pub subscribed: BTreeSet<Uuid>,
    /// Its previous target assignment.
    pub current: &'a Assignment,
}

/// Assigns the partitions of `topics` (topic id -> partition count) to
/// `members`, which must be sorted by id. Every member gets an entry. An
/// unknown assignor name falls back to `uniform` (names are validated when
/// members ask for them).
pub fn assign(
    assignor: &str,
    members: &[MemberSpec<'_>],
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let owned = match assignor {
        RANGE => range(members, topics),
        _ => uniform(members, topics),
    };
    members
        .iter()
        .zip(owned)
        .map(|(m, partitions)| {
            let mut a = Assignment::new();
            for (topic, p) in partitions {
                a.entry(topic).or_default().insert(p);
            }
            (m.id.to_string(), a)
        })
        .collect()
}

type Owned = Vec<BTreeSet<(Uuid, i32)>>;

fn range(members: &[MemberSpec<'_>], topics: &BTreeMap<Uuid, i32>) -> Owned {
    let mut owned: Owned = vec![BTreeSet::new(); members.len()];
    for (&topic, &count) in topics {
        let subscribers: Vec<usize> = (0..members.len())
            .filter(|&m| members[m].subscribed.contains(&topic))
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let n = subscribers.len() as i32;
        let (per, extra) = (count / n, count % n);
        let mut start = 0;
        for (i, &m) in subscribers.iter().enumerate() {
            let size = per + i32::from((i as i32) < extra);
            owned[m].extend((start..start + size).map(|p| (topic, p)));
            start += size;
        }
    }
    owned
}

fn uniform(members: &[MemberSpec<'_>], topics: &BTreeMap<Uuid, i32>) -> Owned {
    let eligible = |m: usize, topic: &Uuid| {
        topics.contains_key(topic) && members[m].subscribed.contains(topic)
    };
    let mut owned: Owned = vec![BTreeSet::new(); members.len()];
    let mut taken: HashMap<(Uuid, i32), usize> = HashMap::new();
    // 1. Stickiness.
    for (m, spec) in members.iter().enumerate() {
        for (topic, partitions) in spec.current {
            if !eligible(m, topic) {
                continue;
            }
            for &p in partitions.range(..topics[topic]) {
                if let std::collections::hash_map::Entry::Vacant(e) = taken.entry((*topic, p)) {
                    e.insert(m);
                    owned[m].insert((*topic, p));
                }
            }
        }
    }
    // 2. Free partitions, those with the fewest candidates first.
    let mut free: Vec<(usize, Uuid, i32)> = topics
        .iter()
        .flat_map(|(&topic, &count)| (0..count).map(move |p| (topic, p)))
        .filter(|tp| !taken.contains_key(tp))
        .map(|(topic, p)| {
            let candidates = (0..members.len()).filter(|&m| eligible(m, &topic)).count();
            (candidates, topic, p)
        })
        .filter(|&(candidates, _, _)| candidates > 0)
        .collect();
    free.sort();
    for (_, topic, p) in free {
        let least_loaded = (0..members.len())
            .filter(|&m| eligible(m, &topic))
            .min_by_key(|&m| (owned[m].len(), m));
        if let Some(m) = least_loaded {
            owned[m].insert((topic, p));
        }
    }
    // 3. Balance: each move lowers the sum of squared loads, so this ends.
    while let Some((from, to, tp)) = best_move(&owned, &eligible) {
        owned[from].remove(&tp);
        owned[to].insert(tp);
    }
    owned
}

/// A partition of the most loaded member that a member with at least two
/// fewer partitions can take, if any.
fn best_move(
    owned: &Owned,
    eligible: &impl Fn(usize, &Uuid) -> bool,
) -> Option<(usize, usize, (Uuid, i32))> {
    let mut by_load: Vec<usize> = (0..owned.len()).collect();
    by_load.sort_by_key(|&m| (Reverse(owned[m].len()), m));
    for &from in &by_load {
        let load = owned[from].len();
        for tp in owned[from].iter().rev() {
            let to = (0..owned.len())
                .filter(|&m| owned[m].len() + 2 <= load && eligible(m, &tp.0))
                .min_by_key(|&m| (owned[m].len(), m));
            if let Some(to) = to {
                return Some((from, to, *tp));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Uuid = Uuid::from_u128(1);
    const B: Uuid = Uuid::from_u128(2);

    fn counts(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values()
            .map(|x| x.values().map(BTreeSet::len).sum())
            .collect()
    }

    fn all_once(a: &BTreeMap<String, Assignment>, topics: &BTreeMap<Uuid, i32>) {
        let mut seen = BTreeSet::new();
        for asg in a.values() {
            for (t, ps) in asg {
                for &p in ps {
                    assert!(seen.insert((*t, p)), "{t}-{p} assigned twice");
                }
            }
        }
        let expected: usize = topics.values().map(|&c| c as usize).sum();
        assert_eq!(seen.len(), expected);
    }

    #[test]
    fn uniform_spreads_evenly_and_sticks() {
        let topics = BTreeMap::from([(A, 6)]);
        let empty = Assignment::new();
        fn specs<'a>(current: &[&'a Assignment]) -> Vec<MemberSpec<'a>> {
            ["m1", "m2", "m3"]
                .iter()
                .zip(current)
                .map(|(id, c)| MemberSpec {
                    id,
                    subscribed: BTreeSet::from([A]),
                    current: c,
                })
                .collect()
        }
        let first = assign(UNIFORM, &specs(&[&empty, &empty, &empty]), &topics);
        assert_eq!(counts(&first), [2, 2, 2]);
        all_once(&first, &topics);
        // m3 leaves: m1 and m2 keep theirs and share m3's.
        let two: Vec<MemberSpec<'_>> = specs(&[&first["m1"], &first["m2"], &empty])
            .into_iter()
            .take(2)
            .collect();
        let second = assign(UNIFORM, &two, &topics);
        assert_eq!(counts(&second), [3, 3]);
        assert!(first["m1"][&A].is_subset(&second["m1"][&A]));
        assert!(first["m2"][&A].is_subset(&second["m2"][&A]));
        // A new member takes from the others without anything else moving.
        let third = assign(
            UNIFORM,
            &specs(&[&second["m1"], &second["m2"], &empty]),
            &topics,
        );
        assert_eq!(counts(&third), [2, 2, 2]);
        assert!(third["m1"][&A].is_subset(&second["m1"][&A]));
        assert!(third["m2"][&A].is_subset(&second["m2"][&A]));
    }

    #[test]
    fn uniform_respects_heterogeneous_subscriptions() {
        let topics = BTreeMap::from([(A, 4), (B, 2)]);
        let empty = Assignment::new();
        let specs = [
            MemberSpec {
                id: "m1",
                subscribed: BTreeSet::from([A]),
                current: &empty,
            },
            MemberSpec {
                id: "m2",
                subscribed: BTreeSet::from([A, B]),
                current: &empty,
            },
        ];
        let a = assign(UNIFORM, &specs, &topics);
        all_once(&a, &topics);
        assert_eq!(counts(&a), [3, 3]);
        assert!(!a["m1"].contains_key(&B));
    }

    #[test]
    fn range_gives_consecutive_ranges_in_member_order() {
        let topics = BTreeMap::from([(A, 5), (B, 5)]);
        let empty = Assignment::new();
        let specs: Vec<MemberSpec<'_>> = ["a", "b"]
            .iter()
            .map(|id| MemberSpec {
                id,
                subscribed: BTreeSet::from([A, B]),
                current: &empty,
            })
            .collect();
        let a = assign(RANGE, &specs, &topics);
        assert_eq!(a["a"][&A], BTreeSet::from([0, 1, 2]));
        assert_eq!(a["b"][&A], BTreeSet::from([3, 4]));
        assert_eq!(a["a"][&B], a["a"][&A]);
    }
}
