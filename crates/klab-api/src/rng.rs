//! One seeded random source per run: UIDs, `generateName` suffixes, jitter, fault schedules.
//! Seeded ChaCha so that a sim run is a pure function of (binary, scenario, seed).
#![allow(clippy::disallowed_methods)] // seeding from OS entropy is allowed here, for `klab up` only

use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Cheap to clone; every clone draws from the same sequence.
#[derive(Clone, Debug)]
pub struct DetRng {
    inner: Arc<Mutex<ChaCha8Rng>>,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The alphabet upstream uses for `generateName` suffixes (no vowels, no confusable digits).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl DetRng {
    pub fn seeded(seed: u64) -> Self {
        DetRng {
            inner: Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed))),
        }
    }

    /// A seed from the OS, for live clusters where reproducibility is not wanted.
    pub fn from_entropy() -> Self {
        DetRng {
            inner: Arc::new(Mutex::new(ChaCha8Rng::from_os_rng())),
        }
    }

    /// An independent sequence derived from this one's current state without drawing from it
    /// (ChaCha stream `stream`): what it yields never shifts the draws of this sequence, so
    /// objects added at start-up need not rename everything drawn after them.
    pub fn side_stream(&self, stream: u64) -> DetRng {
        let mut r = self.with(|r| r.clone());
        r.set_stream(stream);
        DetRng {
            inner: Arc::new(Mutex::new(r)),
        }
    }

    /// An independent copy at this sequence's current position: it yields what this one would
    /// yield next, without drawing from it (a dry run that must not shift the real draws).
    pub fn snapshot(&self) -> DetRng {
        DetRng {
            inner: Arc::new(Mutex::new(self.with(|r| r.clone()))),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut ChaCha8Rng) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// A random (version 4 shaped) UUID string, as `metadata.uid`.
    pub fn uid(&self) -> String {
        let mut b: [u8; 16] = self.with(|r| r.random());
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        // Written out by hand: a UID is drawn for every object created.
        let mut s = String::with_capacity(36);
        for (i, x) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                s.push('-');
            }
            s.push(HEX[usize::from(x >> 4)] as char);
            s.push(HEX[usize::from(x & 0x0f)] as char);
        }
        s
    }

    /// `n` characters from upstream's `generateName` alphabet.
    pub fn suffix(&self, n: usize) -> String {
        self.with(|r| {
            (0..n)
                .map(|_| SUFFIX_ALPHABET[r.random_range(0..SUFFIX_ALPHABET.len())] as char)
                .collect()
        })
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&self) -> f64 {
        self.with(|r| r.random::<f64>())
    }

    /// A uniform integer in `[lo, hi)`.
    pub fn range(&self, lo: u64, hi: u64) -> u64 {
        self.with(|r| r.random_range(lo..hi))
    }

    /// 32 hex characters (boot IDs, machine IDs).
    pub fn hex32(&self) -> String {
        let b: [u8; 16] = self.with(|r| r.random());
        b.iter()
            .flat_map(|x| [HEX[usize::from(x >> 4)], HEX[usize::from(x & 0x0f)]])
            .map(char::from)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (a, b) = (DetRng::seeded(7), DetRng::seeded(7));
        assert_eq!(a.uid(), b.uid());
        assert_eq!(a.suffix(5), b.suffix(5));
        assert_ne!(DetRng::seeded(8).uid(), DetRng::seeded(7).uid());
    }

    #[test]
    fn shapes() {
        let r = DetRng::seeded(1);
        let u = r.uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        let s = r.suffix(5);
        assert_eq!(s.len(), 5);
        assert!(s.bytes().all(|c| SUFFIX_ALPHABET.contains(&c)));
        assert_eq!(r.hex32().len(), 32);
        // The same text as formatting each byte, which the shipped traces were made with.
        let (a, b) = (DetRng::seeded(9), DetRng::seeded(9));
        let mut bytes: [u8; 16] = b.with(|r| r.random());
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let h: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
        let want = format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        );
        assert_eq!(a.uid(), want);
        let bytes: [u8; 16] = b.with(|r| r.random());
        let want: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(a.hex32(), want);
    }
}
