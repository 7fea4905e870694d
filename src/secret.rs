//! A secret setting's value: carried like a string, never printed.

use serde::{Deserialize, Serialize};

/// A secret string: deserializes like a string, never prints (Debug shows that it is set, not
/// what it is), serializes as itself only so the layered configuration can carry it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "(none)"
        } else {
            "(redacted)"
        })
    }
}
