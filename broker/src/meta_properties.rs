//! `meta.properties` in every log dir, as Kafka writes it: the node id, the
//! cluster id and a directory id. The first start writes the configured
//! cluster id (a lone node generates one when none is configured); later
//! starts refuse a log dir that belongs to another cluster or node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use uuid::Uuid;

use ottla_protocol::names::uuid_text;

pub const META_PROPERTIES: &str = "meta.properties";

fn read(path: &Path) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(Some(
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
    ))
}

/// Whether a node with no cluster id anywhere may make one up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unformatted {
    /// A lone node (the only voter, and a broker too) generates one: a
    /// single node needs no configuration.
    Generate,
    /// A node of a multi-node cluster refuses to start: nodes that each
    /// made one up would be of different clusters (Kafka's answer is
    /// `kafka-storage.sh format` with one id for every node).
    Refuse,
}

/// Returns the cluster id, writing `meta.properties` where it is missing.
/// The log dirs must agree with each other and with `configured`.
pub fn ensure(
    log_dirs: &[PathBuf],
    metadata_dir: &Path,
    node_id: i32,
    configured: Option<&str>,
    unformatted: Unformatted,
) -> anyhow::Result<String> {
    let mut dirs: Vec<&Path> = log_dirs.iter().map(PathBuf::as_path).collect();
    if !dirs.contains(&metadata_dir) {
        dirs.push(metadata_dir);
    }
    // The first cluster id found, and where.
    let mut found: Option<(String, PathBuf)> = None;
    for dir in &dirs {
        let path = dir.join(META_PROPERTIES);
        if let Some(props) = read(&path)? {
            if let Some(n) = props.get("node.id") {
                if n != &node_id.to_string() {
                    bail!("{} belongs to node {n}, but this broker is node.id={node_id}; point log.dirs at this node's own directories", path.display());
                }
            }
            if let Some(c) = props.get("cluster.id") {
                match &found {
                    Some((existing, first)) if existing != c => bail!(
                        "log dirs belong to different clusters: {} says cluster.id={existing}, {} says cluster.id={c}; every log dir of a node must come from the same cluster: remove or move the dirs of the other cluster (or fix log.dirs)",
                        first.display(),
                        path.display()
                    ),
                    Some(_) => {}
                    None => found = Some((c.clone(), path)),
                }
            }
        }
    }
    if let (Some((found, path)), Some(wanted)) = (&found, configured) {
        if found != wanted {
            bail!(
                "{} says this node belongs to cluster {found} but cluster.id is {wanted}; fix cluster.id, or point log.dirs at this cluster's data",
                path.display()
            );
        }
    }
    let cluster_id = match (found, configured, unformatted) {
        (Some((id, _)), _, _) => id,
        (None, Some(id), _) => id.to_string(),
        (None, None, Unformatted::Generate) => uuid_text(&Uuid::new_v4()),
        (None, None, Unformatted::Refuse) => bail!(
            "cluster.id is not set and no log dir has a meta.properties naming one; nodes of a multi-node cluster do not make one up (each would make up its own and they would not form one cluster): set the same cluster.id on every node, for example cluster.id={}",
            uuid_text(&Uuid::new_v4())
        ),
    };
    for dir in &dirs {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(META_PROPERTIES);
        if path.exists() {
            continue;
        }
        let body = format!(
            "#\n#Written by ottla\nnode.id={node_id}\nversion=1\ncluster.id={cluster_id}\ndirectory.id={}\n",
            uuid_text(&Uuid::new_v4())
        );
        ottla_storage::checkpoint::write_atomically(&path, body.as_bytes())?;
    }
    Ok(cluster_id)
}

/// The `directory.id` of `dir`'s `meta.properties` (written by [`ensure`]).
pub fn directory_id(dir: &Path) -> anyhow::Result<Uuid> {
    let path = dir.join(META_PROPERTIES);
    let props = read(&path)?.with_context(|| format!("{} is missing", path.display()))?;
    props
        .get("directory.id")
        .and_then(|text| ottla_protocol::names::uuid_from_text(text))
        .with_context(|| format!("{} has no valid directory.id", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use Unformatted::{Generate, Refuse};

    #[test]
    fn cluster_id_is_generated_once_and_checked() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let id = ensure(std::slice::from_ref(&a), &a, 1, None, Generate).unwrap();
        assert_eq!(id.len(), 22);
        let directory = directory_id(&a).unwrap();
        // Once written it is kept, even where none would be made up.
        assert_eq!(
            ensure(std::slice::from_ref(&a), &a, 1, None, Refuse).unwrap(),
            id
        );
        assert_eq!(
            directory_id(&a).unwrap(),
            directory,
            "a directory keeps its id"
        );
        let e = ensure(std::slice::from_ref(&a), &a, 2, None, Generate)
            .unwrap_err()
            .to_string();
        assert!(e.contains("node.id=2"), "{e}");
    }

    #[test]
    fn a_node_of_a_cluster_needs_a_cluster_id() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let e = ensure(std::slice::from_ref(&a), &a, 1, None, Refuse)
            .unwrap_err()
            .to_string();
        assert!(e.contains("set the same cluster.id on every node"), "{e}");
        assert!(!a.join(META_PROPERTIES).exists(), "nothing formatted");
        let id = "MkU3OEVBNTcwNTJENDM2Qk";
        assert_eq!(
            ensure(std::slice::from_ref(&a), &a, 1, Some(id), Refuse).unwrap(),
            id
        );
        let text = std::fs::read_to_string(a.join(META_PROPERTIES)).unwrap();
        assert!(text.contains(&format!("cluster.id={id}")), "{text}");
    }

    #[test]
    fn log_dirs_must_agree_with_each_other_and_the_configuration() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        let x = ensure(std::slice::from_ref(&a), &a, 1, Some("clusterX"), Refuse).unwrap();
        ensure(std::slice::from_ref(&b), &b, 1, Some("clusterY"), Refuse).unwrap();
        let both = [a.clone(), b.clone()];
        let e = ensure(&both, &a, 1, Some(&x), Refuse)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cluster.id=clusterX") && e.contains("cluster.id=clusterY"),
            "{e}"
        );
        let e = ensure(std::slice::from_ref(&a), &a, 1, Some("clusterY"), Refuse)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cluster clusterX but cluster.id is clusterY"),
            "{e}"
        );
    }
}
