//! Circular: statistics of directions (degrees). The arithmetic mean of 350° and 10° is 180°, the
//! opposite of the truth; a direction's mean is the direction of the mean unit vector, from the
//! means of sine and cosine (which merge like any mean), and its spread Yamartino's (1984)
//! one-pass estimate of the standard deviation of wind direction.

/// Mean sine and cosine of `n` directions: the state two partials merge from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Circular {
    pub n: i64,
    /// None when `n` is 0.
    pub sin: Option<f64>,
    pub cos: Option<f64>,
}

/// A step of a mean smaller than this is taken as 0 (as `sink::stats::TINY_STEP`: PostgreSQL
/// refuses a product that underflows, where Rust gives 0).
const TINY_STEP: f64 = f64::from_bits(1 << 44);

/// The mean of two means weighted by their counts, written exactly as the database's merge
/// writes it (`sink::stats`), so both agree to the last bit: `a + (b − a) · nb / (na + nb)`.
fn merge_mean(na: i64, a: f64, nb: i64, b: f64) -> f64 {
    let d = b - a;
    let w = nb as f64 / (na + nb) as f64;
    a + if d.abs() < TINY_STEP { 0.0 } else { d * w }
}

impl Circular {
    pub const EMPTY: Circular = Circular {
        n: 0,
        sin: None,
        cos: None,
    };

    /// One direction, in degrees.
    pub fn of(deg: f64) -> Circular {
        let r = deg.to_radians();
        Circular {
            n: 1,
            sin: Some(r.sin()),
            cos: Some(r.cos()),
        }
    }

    pub fn add(&mut self, deg: f64) {
        *self = self.merge(&Circular::of(deg));
    }

    /// Both sets of directions.
    pub fn merge(&self, b: &Circular) -> Circular {
        let a = self;
        if a.n == 0 {
            return *b;
        }
        if b.n == 0 {
            return *a;
        }
        let m = |x: Option<f64>, y: Option<f64>| Some(merge_mean(a.n, x?, b.n, y?));
        Circular {
            n: a.n + b.n,
            sin: m(a.sin, b.sin),
            cos: m(a.cos, b.cos),
        }
    }
}

/// The mean resultant length: 1 when every direction is the same, near 0 when they cancel.
fn resultant(sin: f64, cos: f64) -> f64 {
    (sin * sin + cos * cos).sqrt().min(1.0)
}

/// Below this resultant length the mean direction is not defined (the directions cancel).
pub(crate) const UNDEFINED_BELOW: f64 = 1e-9;

/// The mean direction in degrees, in [0, 360): the direction of the mean unit vector. None where
/// the directions cancel (350° and 170°).
pub fn mean_deg(sin: f64, cos: f64) -> Option<f64> {
    if resultant(sin, cos) < UNDEFINED_BELOW {
        return None;
    }
    let d = sin.atan2(cos).to_degrees();
    let d = if d < 0.0 { d + 360.0 } else { d };
    Some(if d >= 360.0 { 0.0 } else { d })
}

/// Yamartino's estimate of the directions' standard deviation, in degrees:
/// ε = √(1 − R²), σ = arcsin(ε) · (1 + (2/√3 − 1) · ε³). 0 when they are all the same; about
/// 103.9° (its largest) when they cancel.
pub fn yamartino_deg(sin: f64, cos: f64) -> f64 {
    let r = resultant(sin, cos);
    let e = (1.0 - r * r).max(0.0).sqrt();
    let k = 2.0 / 3f64.sqrt() - 1.0;
    (e.asin() * (1.0 + k * e * e * e)).to_degrees()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn of(ds: &[f64]) -> Circular {
        let mut c = Circular::EMPTY;
        for &d in ds {
            c.add(d);
        }
        c
    }

    #[test]
    fn readings_either_side_of_north_average_to_north() {
        let c = of(&[350.0, 10.0]);
        let m = mean_deg(c.sin.unwrap(), c.cos.unwrap()).unwrap();
        assert!(!(1e-9..=360.0 - 1e-9).contains(&m), "{m}");
        let c = of(&[355.0, 15.0]);
        let m = mean_deg(c.sin.unwrap(), c.cos.unwrap()).unwrap();
        assert!((m - 5.0).abs() < 1e-9, "{m}");
        // Yamartino: two directions 20° apart spread about 10°.
        let s = yamartino_deg(c.sin.unwrap(), c.cos.unwrap());
        assert!((s - 10.0).abs() < 0.1, "{s}");
    }

    #[test]
    fn one_direction_has_no_spread_and_opposites_have_no_mean() {
        let c = of(&[271.0; 50]);
        assert!((mean_deg(c.sin.unwrap(), c.cos.unwrap()).unwrap() - 271.0).abs() < 1e-9);
        assert!(yamartino_deg(c.sin.unwrap(), c.cos.unwrap()) < 1e-5);
        let c = of(&[90.0, 270.0]);
        assert_eq!(mean_deg(c.sin.unwrap(), c.cos.unwrap()), None);
        assert!((yamartino_deg(c.sin.unwrap(), c.cos.unwrap()) - 103.923).abs() < 0.01);
    }

    proptest! {
        /// Merging partials in any split gives the figures one pass gives, and the mean
        /// direction is the same for a direction given as d, d + 360 or d − 360.
        #[test]
        fn merges_equal_one_pass(ds in proptest::collection::vec(0.0f64..360.0, 1..60), cut in 0usize..60) {
            let cut = cut.min(ds.len());
            let whole = of(&ds);
            let parts = of(&ds[..cut]).merge(&of(&ds[cut..]));
            prop_assert_eq!(whole.n, parts.n);
            prop_assert!((whole.sin.unwrap() - parts.sin.unwrap()).abs() < 1e-12);
            prop_assert!((whole.cos.unwrap() - parts.cos.unwrap()).abs() < 1e-12);
            let wrapped: Vec<f64> = ds.iter().enumerate().map(|(i, d)| if i % 2 == 0 { d + 360.0 } else { d - 360.0 }).collect();
            let w = of(&wrapped);
            prop_assert!((w.sin.unwrap() - whole.sin.unwrap()).abs() < 1e-12);
            prop_assert!((w.cos.unwrap() - whole.cos.unwrap()).abs() < 1e-12);
        }

        /// The vector mean of directions within a half-circle arc lies in that arc.
        #[test]
        fn the_mean_lies_within_a_narrow_arc(start in 0.0f64..360.0, spread in 0.0f64..170.0, ks in proptest::collection::vec(0.0f64..1.0, 1..40)) {
            let ds: Vec<f64> = ks.iter().map(|k| (start + k * spread) % 360.0).collect();
            let c = of(&ds);
            let m = mean_deg(c.sin.unwrap(), c.cos.unwrap()).unwrap();
            let off = (m - start).rem_euclid(360.0);
            prop_assert!(off <= spread + 1e-6, "mean {} outside [{}, {}+{}]", m, start, start, spread);
        }
    }
}
