//! Directions: the measurement sector a turbine's curve is taken in (the directions where
//! neighbours and obstacles do not disturb the wind it sees; a sector may cross north), and the
//! wind rose that helps choose it — intervals counted by direction sector and wind speed class.

/// How far outside a sector's bound, in degrees, a direction still counts as on it.
pub const BOUND_SLACK: f64 = 1e-9;

/// A sector of directions, clockwise from `from` to `to` degrees (from 350 to 20 crosses north);
/// `[0, 360]` is every direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sector {
    pub from: f64,
    pub to: f64,
}

impl Sector {
    /// From two bearings in `[0, 360]`, not equal (an empty sector). Else what is wrong.
    pub fn new(from: f64, to: f64) -> Result<Sector, String> {
        let ok = |x: f64| (0.0..=360.0).contains(&x);
        if !ok(from) || !ok(to) {
            return Err(format!(
                "[{from}, {to}]: each bound is a bearing from 0 to 360 degrees"
            ));
        }
        if from == to || (from, to) == (360.0, 0.0) {
            return Err(format!(
                "[{from}, {to}] holds no direction: a sector runs clockwise from its first bound to its second ([0, 360] is all)"
            ));
        }
        Ok(Sector { from, to })
    }

    /// Its width in degrees, clockwise.
    pub fn width(&self) -> f64 {
        if self.to > self.from {
            self.to - self.from
        } else {
            self.to - self.from + 360.0
        }
    }

    /// Whether direction `d` (in `[0, 360)`) lies inside, both bounds included, to
    /// [`BOUND_SLACK`] (a vector mean of directions all at 15° is 14.999999999999998°).
    pub fn contains(&self, d: f64) -> bool {
        let off = if d >= self.from - BOUND_SLACK {
            d - self.from
        } else {
            d - self.from + 360.0
        };
        off <= self.width() + BOUND_SLACK || (self.to == 360.0 && self.from == 0.0)
    }
}

/// The upper bounds of the wind rose's speed classes, m/s: 0–4, 4–8, 8–12, 12–16, and 16 up.
pub const SPEED_CLASSES: [f64; 4] = [4.0, 8.0, 12.0, 16.0];

/// The number of sectors a rose may be drawn with.
pub const ROSE_SECTORS: [usize; 3] = [8, 12, 16];

/// Intervals counted by direction sector (sector 0 centred on north) and speed class.
#[derive(Debug, Clone, PartialEq)]
pub struct Rose {
    pub sectors: usize,
    /// `counts[sector][class]`, classes as [`SPEED_CLASSES`] bound them.
    pub counts: Vec<[i64; 5]>,
}

impl Rose {
    /// The rose of `points` (direction in degrees, mean wind in m/s) in `sectors` sectors; a
    /// point whose direction or wind is not finite, or whose wind is negative, is left out.
    pub fn of(points: impl IntoIterator<Item = (f64, f64)>, sectors: usize) -> Rose {
        let mut counts = vec![[0i64; 5]; sectors];
        for (d, w) in points {
            if let (Some(s), true) = (sector_of(d, sectors), w.is_finite() && w >= 0.0) {
                counts[s][class_of(w)] += 1;
            }
        }
        Rose { sectors, counts }
    }

    /// All intervals counted.
    pub fn total(&self) -> i64 {
        self.counts.iter().flatten().sum()
    }
}

/// The sector of direction `d` among `n` centred on north (`[360 − w/2, w/2)` is sector 0).
pub fn sector_of(d: f64, n: usize) -> Option<usize> {
    if !d.is_finite() || n == 0 {
        return None;
    }
    let w = 360.0 / n as f64;
    let turned = (d + w / 2.0).rem_euclid(360.0);
    Some(((turned / w).floor() as usize).min(n - 1))
}

/// The speed class of wind `w` ([`SPEED_CLASSES`]; the last class is open).
pub fn class_of(w: f64) -> usize {
    SPEED_CLASSES.iter().take_while(|&&hi| w >= hi).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_sector_across_north_holds_both_sides_and_its_bounds() {
        let s = Sector::new(340.0, 20.0).unwrap();
        assert_eq!(s.width(), 40.0);
        for d in [340.0, 350.0, 359.9, 0.0, 10.0, 20.0] {
            assert!(s.contains(d), "{d}");
        }
        for d in [339.9, 20.1, 180.0] {
            assert!(!s.contains(d), "{d}");
        }
        // The mean of directions all at 20°, and at 340°: on the bounds.
        let at = |x: f64| {
            let r = x.to_radians();
            r.sin().atan2(r.cos()).to_degrees().rem_euclid(360.0)
        };
        assert!(s.contains(at(20.0)) && s.contains(at(340.0)));
        assert!(Sector::new(15.0, 90.0)
            .unwrap()
            .contains(14.999999999999998));
        let all = Sector::new(0.0, 360.0).unwrap();
        assert!([0.0, 90.0, 359.999].iter().all(|&d| all.contains(d)));
        assert!(Sector::new(10.0, 10.0).is_err());
        assert!(Sector::new(360.0, 0.0).is_err());
        assert!(Sector::new(-1.0, 10.0).is_err());
        assert!(Sector::new(0.0, f64::NAN).is_err());
        assert!(Sector::new(90.0, 360.0).unwrap().contains(359.0));
        assert!(!Sector::new(90.0, 360.0).unwrap().contains(45.0));
    }

    #[test]
    fn the_rose_counts_north_in_sector_zero() {
        assert_eq!(sector_of(359.0, 12), Some(0));
        assert_eq!(sector_of(14.99, 12), Some(0));
        assert_eq!(sector_of(15.0, 12), Some(1));
        assert_eq!(sector_of(180.0, 16), Some(8));
        assert_eq!(sector_of(f64::NAN, 12), None);
        assert_eq!(
            (class_of(0.0), class_of(3.99), class_of(4.0), class_of(30.0)),
            (0, 0, 1, 4)
        );
        let r = Rose::of(
            [
                (0.0, 5.0),
                (355.0, 17.0),
                (90.0, 2.0),
                (f64::NAN, 1.0),
                (10.0, -1.0),
            ],
            12,
        );
        assert_eq!(r.total(), 3);
        assert_eq!(r.counts[0], [0, 1, 0, 0, 1]);
        assert_eq!(r.counts[3], [1, 0, 0, 0, 0]);
    }

    proptest! {
        #[test]
        fn every_direction_has_one_sector_and_the_rose_loses_none(ds in proptest::collection::vec((0.0f64..360.0, 0.0f64..40.0), 0..200), n in prop::sample::select(vec![8usize, 12, 16])) {
            let r = Rose::of(ds.iter().copied(), n);
            prop_assert_eq!(r.total(), ds.len() as i64);
            for (d, _) in &ds {
                let s = sector_of(*d, n).unwrap();
                let centre = s as f64 * 360.0 / n as f64;
                let off = (d - centre + 540.0).rem_euclid(360.0) - 180.0;
                prop_assert!(off.abs() <= 180.0 / n as f64 + 1e-9, "{} in {}", d, s);
            }
        }

        #[test]
        fn a_sector_and_its_complement_share_only_their_bounds(from in 0.0f64..360.0, width in 1.0f64..359.0, d in 0.0f64..360.0) {
            let to = (from + width).rem_euclid(360.0);
            let s = Sector::new(from, to).unwrap();
            let rest = Sector::new(to, from).unwrap();
            prop_assert!(s.contains(d) || rest.contains(d));
            if s.contains(d) && rest.contains(d) {
                prop_assert!((d - from).abs() < 1e-6 || (d - to).abs() < 1e-6 || (d - from).abs() > 359.999 || (d - to).abs() > 359.999);
            }
        }
    }
}
