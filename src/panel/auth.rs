//! Auth: the panel's users (a file of `name:argon2id-hash` lines) and how a password is checked:
//! in constant time, a few at a time, remembered for a while, with failures counted per client.
//!
//! The costs are chosen for a 2-core machine: one argon2id verification at the default cost is
//! tens of milliseconds of one core, so a signed-in user's requests are not verified again (a
//! verified user name and password are remembered for [`REMEMBER_FOR`] by a keyed digest, never
//! as text), at most [`VERIFYING_AT_ONCE`] verifications run at a time, and a client address with
//! [`FAILURES_BEFORE_LOCK`] failures in [`FAILURE_WINDOW`] is refused without verifying until the
//! window ends. Wrong passwords then cost the machine at most two cores' worth of hashing,
//! whoever sends them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

/// How long a verified user name and password are remembered.
const REMEMBER_FOR: Duration = Duration::from_secs(600);
/// Most credentials remembered at once (only verified ones are, so only real users fill it).
const REMEMBERED_AT_MOST: usize = 1024;
/// Verifications running at once; more wait up to [`VERIFY_WAIT`], then are answered 503.
const VERIFYING_AT_ONCE: usize = 2;
const VERIFY_WAIT: Duration = Duration::from_secs(5);
/// Failures from one client address that lock it out until its window ends.
pub const FAILURES_BEFORE_LOCK: u32 = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(300);
/// Client addresses whose failures are counted at once.
const CLIENTS_COUNTED: usize = 10_000;

/// The cost `galewatch panel hash-password` writes: OWASP's first argon2id choice (19 MiB, two
/// passes, one lane), about 30 ms of one core in a release build.
const DEFAULT_MEMORY_KIB: u32 = 19_456;
const DEFAULT_PASSES: u32 = 2;
/// The least a users file's hash may cost (OWASP's cheapest argon2id choice, m = 7 MiB, t = 5).
const MIN_MEMORY_KIB: u32 = 7_168;
const MIN_MEMORY_PASSES: u64 = 35_840;
/// The most a users file's hash may ask for: more would let one sign-in take the machine.
const MAX_MEMORY_KIB: u32 = 262_144;
const MAX_PASSES: u32 = 10;
const MAX_LANES: u32 = 8;

/// Longest user name and password taken (a longer one is refused without hashing).
const MAX_NAME_BYTES: usize = 256;
const MAX_PASSWORD_BYTES: usize = 1024;

/// What is wrong with a users file, by line number (1 is the first); never quoting the hash.
#[derive(Debug, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub problem: String,
}

/// Why a user name cannot be used, or None. Shared by the users file and `hash-password`.
pub fn bad_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("an empty user name")
    } else if name.len() > MAX_NAME_BYTES {
        Some("a user name longer than 256 bytes")
    } else if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Some("a user name with white space or a control character")
    } else if name.contains(':') {
        Some("a user name with a `:` (HTTP Basic ends the name at the first one)")
    } else {
        None
    }
}

/// Why a hash is not one the panel takes, or its cost.
fn check_hash(hash: &str) -> Result<Params, String> {
    if hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$") {
        return Err(
            "a bcrypt hash (htpasswd -B): the panel takes argon2id; make the line with \
                    `galewatch panel hash-password NAME`"
                .into(),
        );
    }
    let parsed = PasswordHash::new(hash).map_err(|e| {
        format!(
            "not an argon2id hash in PHC form ($argon2id$v=19$m=…,t=…,p=…$salt$hash): {e}; make \
             the line with `galewatch panel hash-password NAME`"
        )
    })?;
    if parsed.algorithm.as_str() != "argon2id" {
        return Err(format!(
            "a {} hash: the panel takes argon2id only",
            parsed.algorithm.as_str()
        ));
    }
    if parsed.version != Some(0x13) {
        return Err("argon2id of another version than 19 (v=19 is missing or different)".into());
    }
    if parsed.salt.is_none() || parsed.hash.is_none() {
        return Err("argon2id without its salt or its hash".into());
    }
    let params = Params::try_from(&parsed).map_err(|e| format!("argon2id parameters: {e}"))?;
    if params.m_cost() > MAX_MEMORY_KIB
        || params.t_cost() > MAX_PASSES
        || params.p_cost() > MAX_LANES
    {
        return Err(format!(
            "argon2id costing more than m={MAX_MEMORY_KIB} KiB, t={MAX_PASSES}, p={MAX_LANES} \
             (m={}, t={}, p={}): every sign-in would take the machine",
            params.m_cost(),
            params.t_cost(),
            params.p_cost()
        ));
    }
    Ok(params)
}

/// Why a hash costs less than OWASP's least argon2id choices (19 MiB × 2 passes, 12 × 3, 9 × 4,
/// 7 × 5), if it does: a stolen users file would then be cracked fast. Said at start, not
/// refused: the hash still checks the password.
fn too_cheap(params: &Params) -> Option<String> {
    let (m, t) = (params.m_cost(), params.t_cost());
    (m < MIN_MEMORY_KIB || u64::from(m) * u64::from(t) < MIN_MEMORY_PASSES).then(|| {
        format!(
            "a users file hash costs less than OWASP's least argon2id (m=19456, t=2; or m × t \
             of {MIN_MEMORY_PASSES} KiB with m at least {MIN_MEMORY_KIB}): m={m}, t={t}; a stolen \
             file would be cracked fast: remake the line with `galewatch panel hash-password NAME`"
        )
    })
}

/// The users of a users file: name → argon2id hash (PHC text).
#[derive(Clone)]
pub struct Users {
    hashes: HashMap<String, String>,
    /// The dearest user's cost: an unknown name is verified against a hash of it, and a cheaper
    /// user's verification is followed by a hash of the difference (`pads`), so that every
    /// answer costs the same work and none tells a known name, however loaded the machine.
    cost: Params,
    /// Per user whose hash is cheaper than the dearest: the cost of the work that makes up the
    /// difference.
    pads: HashMap<String, Params>,
    /// Whether the users' hashes differ in cost.
    mixed: bool,
}

/// The cost of a hash doing `work` KiB-passes (one lane), at most [`MAX_MEMORY_KIB`] a pass;
/// None when there is too little to be worth a hash.
fn pad(work: u64) -> Option<Params> {
    if work < 8 {
        return None;
    }
    let passes = work.div_ceil(u64::from(MAX_MEMORY_KIB)).max(1);
    let memory = u32::try_from(work / passes).ok()?.max(8);
    Params::new(memory, u32::try_from(passes).ok()?, 1, None).ok()
}

/// What a hash of these parameters costs to verify, in KiB-passes (the argon2 crate hashes the
/// lanes one after another: the time follows memory × passes).
fn work(p: &Params) -> u64 {
    u64::from(p.m_cost()) * u64::from(p.t_cost())
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Users({} users)", self.hashes.len())
    }
}

impl Users {
    /// Reads a users file: one `name:hash` a line; blank lines and lines starting with `#` are
    /// left out; a Windows line end or a byte-order mark is fine. At least one user.
    pub fn parse(text: &str) -> Result<Users, LineError> {
        let mut hashes = HashMap::new();
        let mut first_line = HashMap::new();
        let mut costs = Vec::new();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let err = |problem: String| LineError { line: n, problem };
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let Some((name, hash)) = line.split_once(':') else {
                return Err(err(
                    "no `:` between the user name and the hash (name:hash)".into()
                ));
            };
            if let Some(why) = bad_name(name) {
                return Err(err(why.into()));
            }
            let params = check_hash(hash).map_err(|p| err(format!("user {name}: {p}")))?;
            if let Some(why) = too_cheap(&params) {
                tracing::warn!(line = n, user = ?name, "{why}");
            }
            if let Some(first) = first_line.insert(name.to_string(), n) {
                return Err(err(format!(
                    "user {name} again (first on line {first}): which line counts would be a \
                     surprise"
                )));
            }
            costs.push(params);
            hashes.insert(name.to_string(), hash.to_string());
        }
        let mixed = costs.windows(2).any(|w| work(&w[0]) != work(&w[1]));
        match costs.iter().max_by_key(|p| work(p)).cloned() {
            Some(cost) => {
                let pads = hashes
                    .iter()
                    .filter_map(|(name, hash)| {
                        let own = Params::try_from(&PasswordHash::new(hash).ok()?).ok()?;
                        Some((name.clone(), pad(work(&cost).checked_sub(work(&own))?)?))
                    })
                    .collect();
                Ok(Users {
                    hashes,
                    cost,
                    pads,
                    mixed,
                })
            }
            None => Err(LineError {
                line: 0,
                problem: "holds no user (name:hash lines)".into(),
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    pub fn knows(&self, name: &str) -> bool {
        self.hashes.contains_key(name)
    }
}

fn argon2(params: Params) -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// A random salt from the system's generator.
fn salt() -> SaltString {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random generator");
    SaltString::encode_b64(&bytes).expect("16 bytes are a valid salt")
}

fn hash_with(password: &str, params: Params) -> String {
    argon2(params)
        .hash_password(password.as_bytes(), &salt())
        .expect("hashing with checked parameters")
        .to_string()
}

/// The argon2id hash of `password` at the default cost, as a users file line takes it.
pub fn hash_password(password: &str) -> String {
    let params = Params::new(DEFAULT_MEMORY_KIB, DEFAULT_PASSES, 1, None).expect("valid params");
    hash_with(password, params)
}

/// Whether `password` is the one of `hash` (a checked PHC string). The comparison is constant
/// time (password-hash compares the outputs with `subtle`).
fn verify(hash: &str, password: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    let Ok(params) = Params::try_from(&parsed) else {
        return false;
    };
    argon2(params)
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
}

/// Why a sign-in was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no credentials, or wrong ones (`why` is for the log; it never holds a password).
    Unauthorized(&'static str),
    /// 429: this client failed too often; it may try again after this long.
    Locked(Duration),
    /// 503: too many verifications waiting.
    Busy,
}

/// Verified credentials, by a keyed digest of name and password (the text is never kept).
struct Remembered {
    entries: HashMap<[u8; 32], (String, Instant)>,
}

impl Remembered {
    fn get(&mut self, digest: &[u8; 32], now: Instant) -> Option<String> {
        match self.entries.get(digest) {
            Some((user, until)) if *until > now => Some(user.clone()),
            Some(_) => {
                self.entries.remove(digest);
                None
            }
            None => None,
        }
    }

    fn put(&mut self, digest: [u8; 32], user: String, now: Instant) {
        if self.entries.len() >= REMEMBERED_AT_MOST {
            self.entries.retain(|_, (_, until)| *until > now);
        }
        if self.entries.len() < REMEMBERED_AT_MOST {
            self.entries.insert(digest, (user, now + REMEMBER_FOR));
        }
    }
}

/// What one more failure from a client means for the log.
#[derive(Debug, PartialEq, Eq)]
pub enum Counted {
    /// The first in its window: worth a line.
    First,
    /// It locks the client out now: worth a line.
    Locks,
    /// Neither (the lines already said it).
    Again,
}

/// One client's window: when it began, its failures, and its attempts being verified now (each
/// counted toward the lock before its hash runs, so that no burst gets more than
/// [`FAILURES_BEFORE_LOCK`] hashes in a window).
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    failed: u32,
    pending: u32,
}

/// Failures per client address, in windows of [`FAILURE_WINDOW`] from each client's first.
pub struct Failures {
    clients: HashMap<IpAddr, Window>,
}

impl Failures {
    pub fn new() -> Self {
        Failures {
            clients: HashMap::new(),
        }
    }

    /// The window of `client`, a new one when its last has ended; None when too many addresses
    /// are counted at once to count this one too.
    fn window(&mut self, client: IpAddr, now: Instant) -> Option<&mut Window> {
        if self.clients.len() >= CLIENTS_COUNTED && !self.clients.contains_key(&client) {
            self.clients
                .retain(|_, w| w.pending > 0 || now < w.start + FAILURE_WINDOW);
            if self.clients.len() >= CLIENTS_COUNTED {
                return None;
            }
        }
        let w = self.clients.entry(client).or_insert(Window {
            start: now,
            failed: 0,
            pending: 0,
        });
        if now >= w.start + FAILURE_WINDOW {
            // Attempts still being verified stay counted in the new window.
            *w = Window {
                start: now,
                failed: 0,
                pending: w.pending,
            };
        }
        Some(w)
    }

    /// How long until `client` may try again, when it is locked out (its failures and the
    /// attempts being verified reach [`FAILURES_BEFORE_LOCK`]).
    pub fn locked(&mut self, client: IpAddr, now: Instant) -> Option<Duration> {
        let w = *self.clients.get(&client)?;
        let end = w.start + FAILURE_WINDOW;
        if now >= end {
            if w.pending == 0 {
                self.clients.remove(&client);
                return None;
            }
            return (w.pending >= FAILURES_BEFORE_LOCK).then_some(Duration::from_secs(1));
        }
        (w.failed + w.pending >= FAILURES_BEFORE_LOCK).then(|| end - now)
    }

    /// Counts an attempt of `client` about to be verified, before its hash runs: Err(wait) when
    /// the client is locked out (then nothing is counted). Every reservation ends in
    /// [`Failures::settle`].
    pub fn reserve(&mut self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        if let Some(wait) = self.locked(client, now) {
            return Err(wait);
        }
        if let Some(w) = self.window(client, now) {
            w.pending += 1;
        }
        Ok(())
    }

    /// Ends a reservation: a failure counted as one (and said as [`Failures::fail`] says it), a
    /// success or an attempt never verified taken back.
    pub fn settle(&mut self, client: IpAddr, now: Instant, failed: bool) -> Counted {
        if let Some(w) = self.clients.get_mut(&client) {
            w.pending = w.pending.saturating_sub(1);
        }
        if failed {
            self.fail(client, now)
        } else {
            Counted::Again
        }
    }

    /// Counts one failure of `client`.
    pub fn fail(&mut self, client: IpAddr, now: Instant) -> Counted {
        // Too many addresses at once to count them all: this one goes uncounted (the bound on
        // verifications at once still holds).
        let Some(w) = self.window(client, now) else {
            return Counted::Again;
        };
        w.failed += 1;
        match w.failed {
            1 => Counted::First,
            n if n == FAILURES_BEFORE_LOCK => Counted::Locks,
            _ => Counted::Again,
        }
    }
}

impl Default for Failures {
    fn default() -> Self {
        Failures::new()
    }
}

/// Checks user names and passwords against the users file.
pub struct Verifier {
    users: Users,
    /// A hash of a random password at the dearest user's cost, for unknown names.
    dummy: String,
    key: ring::hmac::Key,
    remembered: Mutex<Remembered>,
    verifying: tokio::sync::Semaphore,
    failures: Mutex<Failures>,
}

impl Verifier {
    /// One hash at the dearest user's cost is computed (and timed) here, for unknown names.
    pub fn new(users: Users) -> Verifier {
        let rng = ring::rand::SystemRandom::new();
        let key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            .expect("the system's random generator");
        let mut random = [0u8; 24];
        ring::rand::SecureRandom::fill(&rng, &mut random).expect("the system's random generator");
        let dummy = hash_with(
            &random
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            users.cost.clone(),
        );
        if users.mixed {
            tracing::warn!(
                "the panel's users file holds hashes of different costs: every sign-in does the \
                 dearest hash's work, so that its time tells no user name; rehash the cheaper ones \
                 (galewatch panel hash-password) or the dearest to make sign-ins no slower than needed"
            );
        }
        Verifier {
            users,
            dummy,
            key,
            remembered: Mutex::new(Remembered {
                entries: HashMap::new(),
            }),
            verifying: tokio::sync::Semaphore::new(VERIFYING_AT_ONCE),
            failures: Mutex::new(Failures::new()),
        }
    }

    pub fn users(&self) -> &Users {
        &self.users
    }

    /// The remembered credentials' key: the name, the password and the client address, so that
    /// a password verified for one address is not taken from another without its own
    /// verification (a locked address would otherwise learn, at no cost, which of its guesses a
    /// user elsewhere has signed in with).
    fn digest(&self, name: &str, password: &str, client: IpAddr) -> [u8; 32] {
        let mut ctx = ring::hmac::Context::with_key(&self.key);
        let client = match client.to_canonical() {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        ctx.update(&client);
        ctx.update(&(name.len() as u64).to_be_bytes());
        ctx.update(name.as_bytes());
        ctx.update(password.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.sign().as_ref());
        out
    }

    /// Counts a failure of `client` and logs what is worth a line (never the password; the
    /// name only when it is a user's, since a password typed into the name field is common).
    pub fn failed(&self, client: IpAddr, name: &str, why: &'static str) {
        let counted = lock(&self.failures).fail(client, Instant::now());
        self.say(counted, client, name, why);
    }

    /// The log line a failure is worth, if any.
    fn say(&self, counted: Counted, client: IpAddr, name: &str, why: &'static str) {
        let user = if self.users.knows(name) {
            name
        } else {
            "(not a user)"
        };
        match counted {
            Counted::First => {
                tracing::warn!(%client, user, reason = why, "panel sign-in refused");
            }
            Counted::Locks => tracing::warn!(
                %client,
                failures = FAILURES_BEFORE_LOCK,
                seconds = FAILURE_WINDOW.as_secs(),
                "panel sign-ins from this address refused until its window ends: too many failed"
            ),
            Counted::Again => {}
        }
    }

    /// Whether `client` is locked out now.
    pub fn locked(&self, client: IpAddr) -> Option<Duration> {
        lock(&self.failures).locked(client, Instant::now())
    }

    /// The user, if `name` and `password` are one's: remembered, or verified at most
    /// [`VERIFYING_AT_ONCE`] at a time.
    pub async fn check(
        self: &Arc<Self>,
        name: &str,
        password: &str,
        client: IpAddr,
    ) -> Result<String, Refusal> {
        if password.is_empty() {
            self.failed(client, name, "empty password");
            return Err(Refusal::Unauthorized("empty password"));
        }
        if name.len() > MAX_NAME_BYTES || password.len() > MAX_PASSWORD_BYTES {
            self.failed(client, name, "user name or password too long");
            return Err(Refusal::Unauthorized("user name or password too long"));
        }
        let digest = self.digest(name, password, client);
        if let Some(user) = lock(&self.remembered).get(&digest, Instant::now()) {
            return Ok(user);
        }
        // Counted toward the lock before the hash runs: whatever arrives at once, at most
        // FAILURES_BEFORE_LOCK hashes run for one address in a window.
        lock(&self.failures)
            .reserve(client, Instant::now())
            .map_err(Refusal::Locked)?;
        let reservation = Reservation {
            verifier: self,
            client,
            name,
            settled: false,
        };
        let Ok(Ok(_permit)) = tokio::time::timeout(VERIFY_WAIT, self.verifying.acquire()).await
        else {
            reservation.settle(None);
            return Err(Refusal::Busy);
        };
        let known = self.users.hashes.get(name);
        let hash = known.unwrap_or(&self.dummy).clone();
        // A cheaper user's hash is followed by the work that makes up the difference: every
        // answer costs the dearest hash's work, loaded machine or not.
        let padding = known.and_then(|_| self.users.pads.get(name).cloned());
        let pw = password.to_string();
        let ok = tokio::task::spawn_blocking(move || {
            let ok = verify(&hash, &pw);
            if let Some(p) = padding {
                let _ = hash_with(&pw, p);
            }
            ok
        })
        .await
        .unwrap_or(false);
        drop(_permit);
        if ok && known.is_some() {
            reservation.settle(Some(true));
            lock(&self.remembered).put(digest, name.to_string(), Instant::now());
            Ok(name.to_string())
        } else {
            reservation.settle(Some(false));
            Err(Refusal::Unauthorized("wrong user name or password"))
        }
    }
}

/// An attempt counted toward its client's lock while it is verified. Settled with its outcome;
/// dropped unsettled (the client went away mid-verification) it counts as a failure, since its
/// hash may have run.
struct Reservation<'a> {
    verifier: &'a Verifier,
    client: IpAddr,
    name: &'a str,
    settled: bool,
}

impl Reservation<'_> {
    /// `Some(true)`: the password was right; `Some(false)`: wrong; None: never verified.
    fn settle(mut self, verified: Option<bool>) {
        self.settled = true;
        let failed = verified == Some(false);
        let counted = lock(&self.verifier.failures).settle(self.client, Instant::now(), failed);
        if failed {
            self.verifier.say(
                counted,
                self.client,
                self.name,
                "wrong user name or password",
            );
        }
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.settled {
            let counted = lock(&self.verifier.failures).settle(self.client, Instant::now(), true);
            self.verifier.say(
                counted,
                self.client,
                self.name,
                "went away while being verified",
            );
        }
    }
}

/// A mutex whose holder panicked is still usable here: the maps stay consistent.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cheap hash for the tests (the cost is not what they check).
    fn cheap(password: &str) -> String {
        hash_with(password, Params::new(1024, 1, 1, None).unwrap())
    }

    #[test]
    fn a_users_file_names_the_line_that_is_wrong_and_never_the_hash() {
        let good = cheap("s3cret");
        let ok = Users::parse(&format!(
            "\u{feff}# the panel's users\n\nalice:{good}\r\n  # bob left\nbob:{good}\n"
        ))
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert!(ok.knows("alice") && ok.knows("bob") && !ok.knows("carol"));

        let secret_part = "c2VjcmV0aGFzaA";
        let cases = [
            (format!("alice:{good}\nbob\n"), 2, "no `:`"),
            (format!(":{good}"), 1, "empty user name"),
            (format!("al ice:{good}"), 1, "white space"),
            (
                format!("alice:{good}\nalice:{good}"),
                2,
                "again (first on line 1)",
            ),
            (
                format!("alice:$argon2id$v=19$m=19456,t=2,p=1${secret_part}"),
                1,
                "without its salt or its hash",
            ),
            (format!("alice:{secret_part}"), 1, "not an argon2id hash"),
            ("alice:".to_string(), 1, "not an argon2id hash"),
            (
                "alice:$2y$05$c2VjcmV0aGFzaAc2VjcmV0aGFzaAc2VjcmV0aGFzaA".to_string(),
                1,
                "bcrypt hash (htpasswd -B)",
            ),
            (
                format!("alice:{}", good.replace("$argon2id$", "$argon2i$")),
                1,
                "argon2i hash: the panel takes argon2id only",
            ),
            (
                format!("alice:{}", good.replace("m=1024", "m=4194304")),
                1,
                "costing more than",
            ),
            (
                format!("alice:{}", good.replace("$v=19", "")),
                1,
                "another version",
            ),
            ("# nobody\n\n".to_string(), 0, "holds no user"),
            (String::new(), 0, "holds no user"),
        ];
        for (text, line, problem) in cases {
            let e = Users::parse(&text).expect_err(&text);
            assert_eq!(e.line, line, "{text}: {e:?}");
            assert!(e.problem.contains(problem), "{text}: {e:?}");
            assert!(
                !e.problem.contains(secret_part) && !e.problem.contains(&good[20..]),
                "the hash is never repeated: {e:?}"
            );
        }
    }

    #[test]
    fn names_the_panel_refuses() {
        for (name, problem) in [
            ("", "empty"),
            ("a:b", "`:`"),
            ("a b", "white space"),
            ("a\tb", "white space"),
            ("a\u{7}", "control"),
        ] {
            assert!(bad_name(name).unwrap().contains(problem), "{name:?}");
        }
        assert_eq!(
            bad_name(&"x".repeat(257)),
            Some("a user name longer than 256 bytes")
        );
        assert_eq!(bad_name("ölçer-2"), None);
    }

    #[test]
    fn the_default_hash_is_argon2id_at_owasps_cost_and_verifies() {
        let h = hash_password("correct horse");
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(check_hash(&h).is_ok());
        assert!(verify(&h, "correct horse"));
        assert!(!verify(&h, "correct hors"));
        assert!(!verify(&h, ""));
        assert_ne!(h, hash_password("correct horse"), "salted");
    }

    #[test]
    fn failures_lock_a_client_for_the_rest_of_its_window_only() {
        let mut f = Failures::new();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        assert_eq!(f.fail(a, t0), Counted::First);
        for i in 2..FAILURES_BEFORE_LOCK {
            assert_eq!(f.locked(a, t0), None, "{i}");
            assert_eq!(f.fail(a, t0), Counted::Again);
        }
        assert_eq!(f.fail(a, t0), Counted::Locks);
        let later = t0 + Duration::from_secs(100);
        assert_eq!(
            f.locked(a, later),
            Some(FAILURE_WINDOW - Duration::from_secs(100))
        );
        assert_eq!(f.locked(b, later), None, "another address is not locked");
        assert_eq!(f.fail(a, later), Counted::Again, "said once");
        assert_eq!(f.locked(a, t0 + FAILURE_WINDOW), None, "the window ended");
        assert_eq!(
            f.fail(a, t0 + FAILURE_WINDOW),
            Counted::First,
            "a new window"
        );
    }

    #[test]
    fn remembered_credentials_expire() {
        let mut r = Remembered {
            entries: HashMap::new(),
        };
        let t0 = Instant::now();
        r.put([1; 32], "alice".into(), t0);
        assert_eq!(r.get(&[1; 32], t0), Some("alice".into()));
        assert_eq!(r.get(&[2; 32], t0), None);
        assert_eq!(r.get(&[1; 32], t0 + REMEMBER_FOR), None);
        assert!(r.entries.is_empty(), "an expired one is dropped");
    }

    #[tokio::test]
    async fn the_verifier_accepts_the_password_remembers_it_and_refuses_the_rest() {
        let users = Users::parse(&format!("alice:{}", cheap("s3cret"))).unwrap();
        let v = Arc::new(Verifier::new(users));
        let client: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(v.check("alice", "s3cret", client).await, Ok("alice".into()));
        assert_eq!(lock(&v.remembered).entries.len(), 1);
        for (name, pw, why) in [
            ("alice", "S3cret", "wrong user name or password"),
            ("mallory", "s3cret", "wrong user name or password"),
            ("alice", "", "empty password"),
        ] {
            assert_eq!(
                v.check(name, pw, client).await,
                Err(Refusal::Unauthorized(why)),
                "{name}"
            );
        }
        // Locked after enough failures, but the remembered user still gets in.
        for _ in 3..FAILURES_BEFORE_LOCK {
            let _ = v.check("alice", "nope", client).await;
        }
        assert!(matches!(
            v.check("alice", "nope", client).await,
            Err(Refusal::Locked(_))
        ));
        assert!(matches!(
            v.check("alice", "s3cret-not", client).await,
            Err(Refusal::Locked(_))
        ));
        assert_eq!(v.check("alice", "s3cret", client).await, Ok("alice".into()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_from_one_address_gets_at_most_the_lock_s_hashes() {
        let users = Users::parse(&format!("alice:{}", cheap("s3cret"))).unwrap();
        let v = Arc::new(Verifier::new(users));
        let client: IpAddr = "192.0.2.9".parse().unwrap();
        let tries: Vec<_> = (0..120)
            .map(|i| {
                let v = v.clone();
                tokio::spawn(async move { v.check("alice", &format!("wrong{i}"), client).await })
            })
            .collect();
        let mut hashed = 0;
        for t in tries {
            match t.await.unwrap() {
                Err(Refusal::Unauthorized(_)) => hashed += 1,
                Err(Refusal::Locked(_) | Refusal::Busy) => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(
            hashed <= FAILURES_BEFORE_LOCK,
            "{hashed} passwords were hashed for one address"
        );
        assert!(
            matches!(
                v.check("alice", "s3cret", client).await,
                Err(Refusal::Locked(_))
            ),
            "the right password while locked"
        );
        let other: IpAddr = "192.0.2.10".parse().unwrap();
        assert_eq!(v.check("alice", "s3cret", other).await, Ok("alice".into()));
    }

    #[test]
    fn reservations_count_toward_the_lock_and_a_success_gives_its_slot_back() {
        let mut f = Failures::new();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..FAILURES_BEFORE_LOCK {
            assert_eq!(f.reserve(a, t0), Ok(()));
        }
        assert!(f.reserve(a, t0).is_err(), "ten in flight lock the eleventh");
        f.settle(a, t0, true);
        assert!(f.reserve(a, t0).is_err(), "a failure keeps its slot");
        f.settle(a, t0, false);
        assert_eq!(f.reserve(a, t0), Ok(()), "a success gives its slot back");
        // The window ends: failures are forgotten, attempts still being verified are not.
        let later = t0 + FAILURE_WINDOW;
        assert_eq!(f.reserve(a, later), Ok(()));
        for _ in 0..FAILURES_BEFORE_LOCK {
            f.settle(a, later, true);
        }
        assert!(f.locked(a, later).is_some());
    }

    #[tokio::test]
    async fn every_answer_costs_the_dearest_hash_s_work() {
        let dear = hash_with("b", Params::new(16 * 1024, 3, 1, None).unwrap());
        let users = Users::parse(&format!("cheap:{}\ndear:{dear}\n", cheap("a"))).unwrap();
        assert!(users.mixed);
        assert_eq!(work(&users.cost), 16 * 1024 * 3);
        // The cheap user's hash and its pad add up to the dearest's work; the dearest has none.
        let pad = users.pads.get("cheap").expect("a pad");
        assert_eq!(work(pad) + 1024, 16 * 1024 * 3);
        assert!(!users.pads.contains_key("dear"));
        let v = Arc::new(Verifier::new(users));
        // An unknown name is verified against a hash of the dearest cost.
        let dummy = Params::try_from(&PasswordHash::new(&v.dummy).unwrap()).unwrap();
        assert_eq!(work(&dummy), work(&v.users.cost));
        let client: IpAddr = "192.0.2.11".parse().unwrap();
        assert_eq!(v.check("cheap", "a", client).await, Ok("cheap".into()));
    }

    #[test]
    fn pads_do_the_work_asked_within_the_cost_bounds() {
        assert_eq!(pad(4), None);
        let p = pad(40_000).unwrap();
        assert_eq!(work(&p), 40_000);
        let big = 3 * u64::from(MAX_MEMORY_KIB) + 5;
        let p = pad(big).unwrap();
        assert!(p.m_cost() <= MAX_MEMORY_KIB && p.t_cost() == 4, "{p:?}");
        assert!(work(&p) <= big && big - work(&p) < 4, "{}", work(&p));
    }

    #[tokio::test]
    async fn a_password_remembered_for_one_address_is_verified_again_from_another() {
        let users = Users::parse(&format!("alice:{}", cheap("s3cret"))).unwrap();
        let v = Arc::new(Verifier::new(users));
        let (home, other): (IpAddr, IpAddr) =
            ("192.0.2.20".parse().unwrap(), "192.0.2.21".parse().unwrap());
        assert_eq!(v.check("alice", "s3cret", home).await, Ok("alice".into()));
        for i in 0..FAILURES_BEFORE_LOCK {
            let _ = v.check("alice", &format!("guess{i}"), other).await;
        }
        // Locked: the right password is no oracle there, though it is remembered for `home`.
        assert!(matches!(
            v.check("alice", "s3cret", other).await,
            Err(Refusal::Locked(_))
        ));
        assert_eq!(v.check("alice", "s3cret", home).await, Ok("alice".into()));
    }

    #[test]
    fn a_hash_cheaper_than_owasps_least_is_said() {
        let p = |m, t| Params::new(m, t, 1, None).unwrap();
        assert!(too_cheap(&p(19_456, 2)).is_none());
        assert!(too_cheap(&p(7_168, 5)).is_none());
        assert!(too_cheap(&p(8, 1)).is_some());
        assert!(
            too_cheap(&p(19_456, 1)).is_some(),
            "one pass of 19 MiB is below 35840"
        );
        assert!(
            too_cheap(&p(4_096, 10)).is_some(),
            "too little memory whatever the passes"
        );
    }
}
