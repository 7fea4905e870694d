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

/// The environment prefix of every setting's variable.
pub const ENV_PREFIX: &str = "GALEWATCH_";

/// The three ways a secret setting is given, for an error that blames it: its variable, the
/// variable naming a file that holds it, and the systemd credential of its name.
pub fn given_as(setting: &str) -> String {
    let var = format!("{ENV_PREFIX}{}", setting.to_uppercase());
    format!("{var}, {var}_FILE or the systemd credential {setting}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_secret_is_given_three_ways() {
        assert_eq!(
            super::given_as("mqtt_password"),
            "GALEWATCH_MQTT_PASSWORD, GALEWATCH_MQTT_PASSWORD_FILE or the systemd credential mqtt_password"
        );
    }
}
