//! Fast: the walk of `shape.rs` written by hand over the payload's bytes, for the payloads a
//! fleet sends every second (an object, or an array of objects, of plain keys and values).
//!
//! It takes only what it can judge exactly as serde_json's walk would: any text it is not sure
//! of (an escape in a string, a control character, a key on the readings' way met twice, an
//! array or a scalar on a field's way, anything past the element limit, deep nesting, and every
//! syntax error) it hands back with `None`, and `shape.rs`'s serde_json walk reads the payload
//! from the start and has the last word, its error messages included. So the two agree on every
//! payload by construction; `json::fuzz::one` checks that they do on every fuzz input and the
//! corpus, and `tests/fuzz_corpus.rs` in CI. The decoder costs 12–17 % fewer instructions a
//! reading with it (docs/performance.md, "The decoders").

use super::shape::{take, Child, Element, Found, Node, Repeated, Seen, Shape, Top};

/// Deeper than this, the serde_json walk decides (its own limit is 128 levels).
const MAX_DEPTH: usize = 64;

/// The walk's place in the payload.
struct Scan<'de> {
    text: &'de str,
    at: usize,
}

/// Walks `text` as `shape` says, as [`Shape::parse`] does; None where the serde_json walk must.
pub(super) fn walk<'de, T>(
    shape: &Shape,
    text: &'de str,
    max: usize,
    scratch: &mut Found<'de>,
    each: &mut dyn FnMut(usize, Element<'_, 'de>) -> T,
) -> Option<Top<'de, T>> {
    let mut s = Scan { text, at: 0 };
    s.ws();
    let top = match (s.peek()?, &shape.readings) {
        (b'{', None) => {
            scratch.clear();
            s.object(&shape.root, scratch, 1)?;
            Top::One(std::mem::take(scratch))
        }
        (b'[', None) => Top::Many(s.elements(&shape.root, max, scratch, each)?),
        (b'{', Some(path)) => {
            let mut out = None;
            s.path(
                path,
                1,
                &mut |s: &mut Scan<'de>| s.elements(&shape.root, max, scratch, each),
                &mut out,
            )?;
            out.map_or(Top::NoReadings, Top::Many)
        }
        _ => return None,
    };
    s.ws();
    (s.at == text.len()).then_some(top)
}

impl<'de> Scan<'de> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Steps over `byte`, or None.
    #[inline]
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Steps over JSON's whitespace.
    #[inline]
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// After a member or an element: steps over the comma and the whitespace after it (true:
    /// another follows) or over `close` (false: the end).
    #[inline]
    fn next(&mut self, close: u8) -> Option<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.at += 1;
                self.ws();
                Some(true)
            }
            b if b == close => {
                self.at += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// A string with no escape and no control character: its text between the quotes.
    #[inline]
    fn string(&mut self) -> Option<&'de str> {
        self.eat(b'"')?;
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut end = start;
        // Eight bytes at a time up to the word holding the first quote, backslash or control
        // character, which is its lowest flagged byte; then a byte at a time (at once at that
        // byte, or through the last few bytes of the payload).
        while let Some(word) = bytes.get(end..end + 8) {
            let flagged = ends_a_string(u64::from_le_bytes(word.try_into().ok()?));
            if flagged != 0 {
                end += flagged.trailing_zeros() as usize / 8;
                break;
            }
            end += 8;
        }
        loop {
            match *bytes.get(end)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => end += 1,
            }
        }
        self.at = end + 1;
        // Both ends are at an ASCII quote: char boundaries.
        Some(&self.text[start..end])
    }

    #[inline]
    fn digits(&mut self) -> Option<()> {
        self.peek()?.is_ascii_digit().then_some(())?;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        Some(())
    }

    /// A number as JSON writes one: `-`, then `0` or digits not led by `0`, a fraction, an
    /// exponent.
    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits()?,
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.digits()?;
        }
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.text.as_bytes().get(self.at..end)? == word).then(|| self.at = end)
    }

    /// Steps over one value of any kind, checked as JSON.
    fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.members(depth, |s, _| s.skip(depth + 1)),
            b'[' => self.items(depth, |s| s.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// Steps into an object or array at `depth`, and over the whitespace after its bracket.
    #[inline]
    fn open(&mut self, depth: usize) -> Option<()> {
        (depth < MAX_DEPTH).then_some(())?;
        self.at += 1;
        self.ws();
        Some(())
    }

    /// The object at `depth` (its `{` next), each member's key handed to `member` with the walk
    /// at its value, which `member` must step over.
    #[inline]
    fn members(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Self, &'de str) -> Option<()>,
    ) -> Option<()> {
        self.open(depth)?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.member_key()?;
            member(self, key)?;
            if !self.next(b'}')? {
                return Some(());
            }
        }
    }

    /// The array at `depth` (its `[` next), `item` called at each element, which it must step
    /// over.
    #[inline]
    fn items(&mut self, depth: usize, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.open(depth)?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            if !self.next(b']')? {
                return Some(());
            }
        }
    }

    /// A member's key, the colon and the whitespace around it: the key.
    #[inline]
    fn member_key(&mut self) -> Option<&'de str> {
        let key = self.string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(key)
    }

    /// One value's text as it stands in the payload.
    #[inline]
    fn value(&mut self, depth: usize) -> Option<&'de str> {
        let start = self.at;
        self.skip(depth)?;
        Some(&self.text[start..self.at])
    }

    /// The object at `node` (its `{` next), into `found`, as `NodeSeed::visit_map` walks it.
    fn object(&mut self, node: &Node, found: &mut Found<'de>, depth: usize) -> Option<()> {
        let mut seen = Seen::default();
        self.members(depth, |s, key| {
            match node
                .children
                .iter()
                .enumerate()
                .find(|(_, e)| e.token == key)
            {
                Some((pos, edge)) => match &edge.to {
                    Child::Leaf(slot) => {
                        let raw = s.value(depth + 1)?;
                        take(found, *slot, raw);
                    }
                    Child::Inner(inner) => {
                        if !seen.insert(pos) && found.repeated.is_none() {
                            found.repeated =
                                Some(Repeated::Path(inner.path.clone(), inner.leads_to));
                        }
                        // A null on the way: the fields under it are absent. An array or a
                        // scalar: the serde_json walk.
                        match s.peek()? {
                            b'{' => s.object(inner, found, depth + 1)?,
                            b'n' => s.literal(b"null")?,
                            _ => return None,
                        }
                    }
                },
                None => s.skip(depth + 1)?,
            }
            Some(())
        })
    }

    /// The object on the way to the readings (its `{` next), following `tokens`, as
    /// `PathSeed::visit_map` does: `found` reads the array at their end into `out`. A key
    /// on the way met twice, or anything but an object on the way and an array at the end: the
    /// serde_json walk.
    fn path<T>(
        &mut self,
        tokens: &[String],
        depth: usize,
        found: &mut dyn FnMut(&mut Scan<'de>) -> Option<Vec<T>>,
        out: &mut Option<Vec<T>>,
    ) -> Option<()> {
        let (head, rest) = tokens.split_first()?;
        let mut seen = false;
        self.members(depth, |s, key| {
            if key != head {
                s.skip(depth + 1)
            } else if std::mem::replace(&mut seen, true) {
                None
            } else if rest.is_empty() {
                (s.peek()? == b'[').then_some(())?;
                *out = Some(found(s)?);
                Some(())
            } else {
                (s.peek()? == b'{').then_some(())?;
                s.path(rest, depth + 1, found, out)
            }
        })
    }

    /// The elements of the array of readings (its `[` next), each an object handed to `each`.
    fn elements<T>(
        &mut self,
        root: &Node,
        max: usize,
        scratch: &mut Found<'de>,
        each: &mut dyn FnMut(usize, Element<'_, 'de>) -> T,
    ) -> Option<Vec<T>> {
        let mut out = Vec::new();
        self.items(0, |s| {
            if s.peek()? != b'{' || out.len() == max {
                return None;
            }
            scratch.clear();
            s.object(root, scratch, 1)?;
            out.push(each(out.len(), Element::Object(scratch)));
            Some(())
        })?;
        Some(out)
    }
}

/// The bytes of `word` (little-endian) that may be a quote, a backslash or a control character
/// (below 0x20), each as its high bit: the classic tests for a zero byte and for a byte below n,
/// which never miss one and flag a byte wrongly only above a true one, so the lowest flag is
/// exact.
#[inline]
fn ends_a_string(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\'))) | below_space
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::json::fuzz::{nested_rules, nested_rules_at_the_top};
    use crate::intake::json::{decode_by, Rules, Walker};
    use chrono::TimeZone;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
            .unwrap()
    }

    /// The flat shape, the gateway's nested one (a readings pointer) and the same at the top.
    fn shapes() -> [Rules; 3] {
        [
            Rules::for_filter("turbines/+/readings"),
            nested_rules(),
            nested_rules_at_the_top(),
        ]
    }

    /// Whether the hand-written walk takes `text` itself under `rules`.
    fn taken(rules: &Rules, text: &str) -> bool {
        let mut scratch = rules.shape.empty();
        walk(&rules.shape, text, 1000, &mut scratch, &mut |_, _| ()).is_some()
    }

    /// Both walks, every outcome equal.
    fn agree(rules: &Rules, text: &[u8]) -> Result<(), TestCaseError> {
        let topic = "turbines/WTG-1/readings";
        let fast = decode_by(topic, text, now(), rules, Walker::Fast);
        let serde = decode_by(topic, text, now(), rules, Walker::Serde);
        prop_assert_eq!(fast, serde, "{}", String::from_utf8_lossy(text));
        Ok(())
    }

    #[test]
    fn what_fleets_send_is_taken_by_the_hand_written_walk() {
        let [flat, nested, top] = shapes();
        let one = r#"{"turbine_id":"WTG-1","recorded_at":"2026-11-30T00:00:00.000Z","power_kw":1500.25,"wind_speed_ms":7.5,"rotor_rpm":12,"extra":{"a":[1,2,{"b":null}],"c":"é"}}"#;
        let many = format!("[{}]", vec![one; 100].join(",\n "));
        for text in [one, &many, " \t\r\n[]\n", "{}"] {
            assert!(taken(&flat, text), "{text}");
            agree(&flat, text.as_bytes()).unwrap();
        }
        let reading = r#"{"id":"A","ts":1764465880.5,"values":{"P":12.5,"Q":[1]},"status":{"code":3,"mode":"run"},"flags":null}"#;
        let gateway =
            format!(r#"{{"site":"north","meta":{{"v":1}},"readings":[{reading},{reading}]}}"#);
        assert!(taken(&nested, &gateway));
        assert!(
            taken(&nested, r#"{"site":"north"}"#),
            "no readings: NoReadings, exact"
        );
        assert!(taken(&top, &format!("[{reading}]")));
        for (rules, text) in [(&nested, gateway.as_str()), (&top, reading)] {
            agree(rules, text.as_bytes()).unwrap();
        }
    }

    #[test]
    fn what_it_is_not_sure_of_goes_to_serde_json() {
        let [flat, nested, top] = shapes();
        let deep = format!(r#"{{"x":{}1{}}}"#, "[".repeat(70), "]".repeat(70));
        for text in [
            r#"{"turbine_id":"W\"1"}"#,    // an escape
            r#"{"turbine_id":"W\u00e9"}"#, // a unicode escape
            "{\"turbine_id\":\"W\u{1}\"}", // a control character
            r#"{"power_kw":01}"#,          // a leading zero
            r#"{"power_kw":1.}"#,          // no fraction digits
            r#"{"power_kw":-}"#,           // no digits
            r#"{"power_kw":1e}"#,          // no exponent digits
            r#"{"power_kw":1,}"#,          // a trailing comma
            r#"[{"power_kw":1},]"#,        // a trailing comma in the array
            r#"{"power_kw":1} x"#,         // text after the value
            r#"{"power_kw":nul}"#,         // a broken literal
            r#"[1]"#,                      // an element not an object
            r#""a string""#,               // a scalar at the top
            r#"{"power_kw" 1}"#,           // no colon
            r#"{'power_kw':1}"#,           // not a JSON string
            &deep,                         // deeper than it goes
        ] {
            assert!(!taken(&flat, text), "{text}");
            agree(&flat, text.as_bytes()).unwrap();
        }
        for text in [
            r#"{"readings":[],"readings":[]}"#, // the readings' key twice
            r#"{"readings":{"a":1}}"#,          // not an array there
        ] {
            assert!(!taken(&nested, text), "{text}");
            agree(&nested, text.as_bytes()).unwrap();
        }
        // An array, or a scalar, where a field's way needs an object.
        for text in [r#"[{"values":{"P":1},"values":[]}]"#, r#"[{"status":5}]"#] {
            assert!(!taken(&top, text), "{text}");
            agree(&top, text.as_bytes()).unwrap();
        }
        // Past the element limit: the serde_json walk refuses the message whole.
        let mut limited = flat.clone();
        limited.limits.max_readings_per_message = 2;
        agree(&limited, b"[{},{},{}]").unwrap();
    }

    /// The word test finds the first byte that ends the fast scan, wherever it is and whatever
    /// follows it, and flags nothing in a word without one.
    #[test]
    fn the_lowest_flag_is_the_first_quote_backslash_or_control_byte() {
        let specials: Vec<u8> = (0u8..0x20).chain([b'"', b'\\']).collect();
        for &special in &specials {
            for at in 0..8 {
                for fill in [b'a', b' ', 0x7f, 0x80, 0xc3, 0xff, 0x00, b'"'] {
                    let mut word = [b'x'; 8];
                    word[at] = special;
                    word[at + 1..].fill(fill);
                    let flagged = ends_a_string(u64::from_le_bytes(word));
                    assert_eq!(
                        flagged.trailing_zeros() / 8,
                        at as u32,
                        "{special:#x} at {at}"
                    );
                }
            }
        }
        assert_eq!(ends_a_string(u64::from_le_bytes(*b"WTG-0042")), 0);
        let text = [0xc3, 0xa9, b'!', b'~', 0x7f, b' ', 0xff, b'#'];
        assert_eq!(ends_a_string(u64::from_le_bytes(text)), 0);
    }

    /// A JSON value from the pieces the shapes look for, and the ones they must refuse.
    fn value() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("turbine_id"),
            Just("recorded_at"),
            Just("power_kw"),
            Just("wind_speed_ms"),
            Just("rotor_rpm"),
            Just("id"),
            Just("ts"),
            Just("site"),
            Just("values"),
            Just("P"),
            Just("status"),
            Just("code"),
            Just("mode"),
            Just("flags"),
            Just("readings"),
            Just("x"),
            Just(""),
            Just("p\\u0077"),
            Just("é"),
        ];
        let scalar = prop_oneof![
            Just("\"WTG-1\""),
            Just("\"2026-11-30T11:59:00Z\""),
            Just("\"\""),
            Just("\"a\\\"b\""),
            Just("\"\\ud800\""),
            Just("\"é\""),
            Just("\"\u{1}\""),
            Just("0"),
            Just("-0"),
            Just("1.5"),
            Just("01"),
            Just("1."),
            Just("-"),
            Just("1e5"),
            Just("1E+2"),
            Just("-1.25e-3"),
            Just("1e400"),
            Just("12345678901234567890"),
            Just(".5"),
            Just("1764465880.25"),
            Just("true"),
            Just("false"),
            Just("null"),
            Just("nul"),
        ]
        .prop_map(String::from);
        let ws = || {
            prop_oneof![
                Just(""),
                Just(""),
                Just(" "),
                Just("\n"),
                Just("\t "),
                Just("\r\n")
            ]
        };
        scalar.prop_recursive(4, 40, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec((key.clone(), inner.clone(), ws()), 0..6).prop_map(
                    |members| {
                        let m: Vec<String> = members
                            .into_iter()
                            .map(|(k, v, w)| format!("{w}\"{k}\"{w}:{w}{v}{w}"))
                            .collect();
                        format!("{{{}}}", m.join(","))
                    }
                ),
                proptest::collection::vec(inner, 0..4)
                    .prop_map(|items| format!("[{}]", items.join(","))),
            ]
        })
    }

    /// The generator is no vacuous test: many of its payloads are the hand-written walk's own.
    #[test]
    fn the_generated_payloads_reach_the_hand_written_walk() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (rules, mut taken_n) = (Rules::for_filter("turbines/+/readings"), 0);
        for _ in 0..1000 {
            let v = value().new_tree(&mut runner).unwrap().current();
            taken_n += usize::from(taken(&rules, &v));
        }
        assert!(taken_n > 100, "{taken_n} of 1,000 taken"); // 306 at this writing
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the payload, cut or with a byte put in anywhere, under every shape: the two
        /// walks give the same outcomes.
        #[test]
        fn both_walks_answer_alike(
            v in value(),
            many in proptest::collection::vec(value(), 0..4),
            cut in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            how in 0u8..4,
        ) {
            let mut text = match how % 2 {
                0 => v.into_bytes(),
                _ => format!("[{}]", [vec![v], many].concat().join(",")).into_bytes(),
            };
            match how {
                2 => text.truncate(cut.index(text.len() + 1)),
                3 => text.insert(cut.index(text.len() + 1), byte),
                _ => {}
            }
            for rules in &shapes() {
                agree(rules, &text)?;
                let wrapped = [br#"{"site":"s","readings":"#.as_slice(), &text, b"}"].concat();
                agree(rules, &wrapped)?;
            }
        }
    }
}
