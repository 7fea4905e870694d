//! A secret setting's value: carried like a string, never printed.

use serde::{Deserialize, Serialize};

use crate::core::setting::ENV_PREFIX;

/// A secret string: deserializes like a string, never prints (Debug shows that it is set, not
/// what it is), serializes as itself only so the layered configuration can carry it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub(crate) fn expose(&self) -> &str {
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

/// A file a setting names (a secret, a CA bundle, a key, the panel's users) read whole, but never
/// past `limit` bytes: `/dev/zero` or a log named by mistake must not take the memory. The
/// error says what was wrong, for a message that names the setting.
pub(crate) fn read_bounded(path: &std::path::Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), e.kind()))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {}", path.display(), e.kind()))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{} is larger than {limit} bytes: not the file this setting takes",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The most a secret's file may hold.
pub(crate) const SECRET_FILE_MAX: u64 = 64 * 1024;

/// The three ways a secret setting is given, for an error that blames it: its variable, the
/// variable naming a file that holds it, and the systemd credential of its name.
pub(crate) fn given_as(setting: &str) -> String {
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
