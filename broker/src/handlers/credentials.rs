//! SCRAM credentials for SASL listeners, read from the broker's metadata
//! image at each login (so AlterUserScramCredentials applies at once).

use ottla_controller::scram::{ScramCredential, ScramMechanism};

use crate::broker::BrokerSlot;
use crate::security::sasl::ScramCredentialStore;

/// The metadata image of the broker the slot holds (none before it opens).
pub struct MetadataCredentials(pub BrokerSlot);

impl ScramCredentialStore for MetadataCredentials {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        let broker = self.0.get()?;
        broker
            .controller
            .image()
            .scram_credentials
            .get(&(user.to_string(), mechanism))
            .cloned()
    }
}
