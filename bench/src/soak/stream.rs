//! The soak's bytes: a deterministic pseudo-random stream (xorshift64,
//! seeded through splitmix64), the same wherever it is cut. The client
//! makes it to send and makes it again to check the echo against, so a
//! misplaced, repeated or dropped chunk shows at its offset; zeros or a
//! short period would let such a chunk pass.

/// The bytes of one seed, in order, handed out in slices of any length.
pub struct Stream {
    state: u64,
    /// The word whose bytes are being handed out, and how many are gone.
    word: [u8; 8],
    used: usize,
}

impl Stream {
    pub fn new(seed: u64) -> Stream {
        // splitmix64 spreads small seeds (connection numbers) over the whole
        // state; xorshift's state must not be zero.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Stream {
            state: z.max(1),
            word: [0; 8],
            used: 8,
        }
    }

    fn next_word(&mut self) -> [u8; 8] {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x.to_le_bytes()
    }

    /// Fills `out` with the stream's next `out.len()` bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        // The rest of the word a previous call began.
        let carried = (8 - self.used).min(out.len());
        out[..carried].copy_from_slice(&self.word[self.used..self.used + carried]);
        self.used += carried;
        let (words, tail) = out[carried..].as_chunks_mut::<8>();
        for word in words {
            *word = self.next_word();
        }
        if !tail.is_empty() {
            self.word = self.next_word();
            let n = tail.len();
            tail.copy_from_slice(&self.word[..n]);
            self.used = n;
        }
    }

    /// The first `N` bytes of `seed`'s stream.
    pub fn bytes<const N: usize>(seed: u64) -> [u8; N] {
        let mut out = [0u8; N];
        Stream::new(seed).fill(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Stream;

    #[test]
    fn the_same_wherever_it_is_cut() {
        let mut whole = vec![0u8; 10_007];
        Stream::new(42).fill(&mut whole);
        for cuts in [
            &[1usize, 7, 8, 9, 3, 64, 1000][..],
            &[5; 40],
            &[8; 30],
            &[13; 20],
        ] {
            let mut pieces = Stream::new(42);
            let mut got = vec![0u8; whole.len()];
            let mut at = 0;
            for &n in cuts.iter().cycle() {
                let n = n.min(got.len() - at);
                pieces.fill(&mut got[at..at + n]);
                at += n;
                if at == got.len() {
                    break;
                }
            }
            assert_eq!(got, whole, "cut as {cuts:?}");
        }
    }

    #[test]
    fn seeds_differ_and_bytes_are_not_flat() {
        let a: [u8; 16] = Stream::bytes(0);
        let b: [u8; 16] = Stream::bytes(1);
        assert_ne!(a, b);
        let mut big = vec![0u8; 1 << 16];
        Stream::new(7).fill(&mut big);
        let mut counts = [0u32; 256];
        for &byte in &big {
            counts[usize::from(byte)] += 1;
        }
        // 256 expected per value; every value present, none dominant.
        assert!(
            counts.iter().all(|&c| (128..512).contains(&c)),
            "{counts:?}"
        );
    }
}
