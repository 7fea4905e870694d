//! Rows: a batch's readings folded into one row per key (a turbine, a turbine's interval), in a
//! hash map that remembers the row of the last reading. A message's readings are one turbine's,
//! as a rule, so most readings find their row without hashing their key.

use std::borrow::Borrow;
use std::hash::Hash;

use indexmap::IndexMap;

/// One row per key, in the order the keys first came.
#[derive(Debug)]
pub struct Rows<K, V> {
    map: IndexMap<K, V, foldhash::fast::RandomState>,
    /// The index of the last row asked for.
    last: usize,
}

impl<K, V> Default for Rows<K, V> {
    fn default() -> Self {
        Rows {
            map: IndexMap::default(),
            last: 0,
        }
    }
}

impl<K: Hash + Eq, V> Rows<K, V> {
    /// The row of `key`, made by `new` (its owned key and first value) if there is none yet.
    #[inline]
    pub fn row<Q>(&mut self, key: &Q, new: impl FnOnce() -> (K, V)) -> &mut V
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = match self.map.get_index(self.last) {
            Some((k, _)) if k.borrow() == key => self.last,
            _ => match self.map.get_index_of(key) {
                Some(at) => at,
                None => {
                    let (k, v) = new();
                    self.map.insert_full(k, v).0
                }
            },
        };
        self.last = at;
        &mut self.map[at]
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The rows in key order (the order an upsert takes its row locks in).
    pub fn sorted(&self) -> impl Iterator<Item = (&K, &V)>
    where
        K: Ord,
    {
        let mut all: Vec<_> = self.map.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the order of the keys, each key's row holds exactly its own values, and the
        /// rows come out sorted: as a plain map would fold them.
        #[test]
        fn rows_fold_as_a_map_does(keys in proptest::collection::vec(0u8..6, 0..200)) {
            let mut rows: Rows<String, Vec<usize>> = Rows::default();
            let mut map = std::collections::BTreeMap::<String, Vec<usize>>::new();
            for (i, k) in keys.iter().enumerate() {
                let key = format!("T{k}");
                rows.row(key.as_str(), || (key.clone(), Vec::new())).push(i);
                map.entry(key).or_default().push(i);
            }
            prop_assert_eq!(rows.len(), map.len());
            let sorted: Vec<(&String, &Vec<usize>)> = rows.sorted().collect();
            prop_assert_eq!(sorted, map.iter().collect::<Vec<_>>());
        }
    }
}
