//! [`QuorumMember`]: this node's part in the metadata quorum, as the
//! controller sees it. Whatever only the leader does is reached through
//! [`QuorumMember::voter`]; an observer never leads.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use super::observer::Observer;
use super::quorum::{Quorum, QuorumError};
use super::Node;
use crate::image::MetadataImage;
use crate::service::{ControllerRequest, ControllerResponse};

pub enum QuorumMember {
    /// A controller: votes, may lead, keeps the metadata log.
    Voter(Box<Quorum>),
    /// A broker-only node: follows the log from the active controller.
    Observer(Observer),
}

impl QuorumMember {
    pub fn voter(&self) -> Option<&Quorum> {
        match self {
            Self::Voter(q) => Some(q.as_ref()),
            Self::Observer(_) => None,
        }
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        match self {
            Self::Voter(q) => q.image(),
            Self::Observer(o) => o.image(),
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        match self {
            Self::Voter(q) => q.subscribe(),
            Self::Observer(o) => o.subscribe(),
        }
    }

    pub fn voters(&self) -> BTreeMap<u64, Node> {
        match self {
            Self::Voter(q) => q.voters(),
            Self::Observer(o) => o.voters(),
        }
    }

    pub fn leader(&self) -> Option<u64> {
        match self {
            Self::Voter(q) => q.leader(),
            Self::Observer(o) => o.leader(),
        }
    }

    /// KRaft's `kraft.version`: 1 when the voters can change (KIP-853).
    pub fn kraft_version(&self) -> i16 {
        match self {
            Self::Voter(q) => q.kraft_version(),
            Self::Observer(o) => o.kraft_version(),
        }
    }

    pub fn term(&self) -> u64 {
        match self {
            Self::Voter(q) => q.term(),
            Self::Observer(o) => o.term(),
        }
    }

    /// Sends a call to the active controller (another node).
    pub async fn forward(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerResponse, QuorumError> {
        match self {
            Self::Voter(q) => q.forward(request).await,
            Self::Observer(o) => o.forward(request).await,
        }
    }

    pub async fn stop(&self) {
        match self {
            Self::Voter(q) => q.stop().await,
            Self::Observer(o) => o.stop(),
        }
    }
}
