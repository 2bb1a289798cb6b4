//! `meta.properties` in every log dir, as Kafka writes it: the node id, the
//! cluster id and a directory id. The first start generates the cluster id;
//! later starts refuse a log dir that belongs to another cluster or node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use uuid::Uuid;

use crate::replica::base64_topic_id;

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

/// Returns the cluster id, writing `meta.properties` where it is missing.
pub fn ensure(
    log_dirs: &[PathBuf],
    metadata_dir: &Path,
    node_id: i32,
    configured: Option<&str>,
) -> anyhow::Result<String> {
    let mut dirs: Vec<&Path> = log_dirs.iter().map(PathBuf::as_path).collect();
    if !dirs.contains(&metadata_dir) {
        dirs.push(metadata_dir);
    }
    let mut cluster_id: Option<String> = None;
    for dir in &dirs {
        let path = dir.join(META_PROPERTIES);
        if let Some(props) = read(&path)? {
            if let Some(n) = props.get("node.id") {
                if n != &node_id.to_string() {
                    bail!("{} belongs to node {n}, but this broker is node.id={node_id}; point log.dirs at this node's own directories", path.display());
                }
            }
            if let Some(c) = props.get("cluster.id") {
                match &cluster_id {
                    Some(existing) if existing != c => bail!(
                        "log dirs belong to different clusters ({existing} and {c} in {}); each log dir must come from the same cluster",
                        path.display()
                    ),
                    _ => cluster_id = Some(c.clone()),
                }
            }
        }
    }
    if let (Some(found), Some(wanted)) = (&cluster_id, configured) {
        if found != wanted {
            bail!("the log dirs belong to cluster {found} but cluster.id is {wanted}; point log.dirs at this cluster's data or fix cluster.id");
        }
    }
    let cluster_id = cluster_id
        .or_else(|| configured.map(str::to_string))
        .unwrap_or_else(|| base64_topic_id(&Uuid::new_v4()));
    for dir in &dirs {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(META_PROPERTIES);
        if path.exists() {
            continue;
        }
        let body = format!(
            "#\n#Written by ottla\nnode.id={node_id}\nversion=1\ncluster.id={cluster_id}\ndirectory.id={}\n",
            base64_topic_id(&Uuid::new_v4())
        );
        ottla_storage::checkpoint::write_atomically(&path, body.as_bytes())?;
    }
    Ok(cluster_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_id_is_generated_once_and_checked() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let id = ensure(std::slice::from_ref(&a), &a, 1, None).unwrap();
        assert_eq!(id.len(), 22);
        assert_eq!(ensure(std::slice::from_ref(&a), &a, 1, None).unwrap(), id);
        let e = ensure(std::slice::from_ref(&a), &a, 2, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("node.id=2"), "{e}");
    }
}
