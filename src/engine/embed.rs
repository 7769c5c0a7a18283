//! Seeded embeddings and weights, identical on every platform.
//!
//! Every value comes from a ChaCha8 stream whose 32-byte seed is spelled out here (the
//! user's seed and a FNV-1a hash of a name), and every f64 is built from the stream's
//! raw 64-bit words with integer arithmetic and one exact scaling. Nothing depends on
//! the platform, the float formatting of a library or the iteration order of a hash map,
//! so the same seed draws the same numbers everywhere. The same word gets the same
//! vector wherever it stands in a sentence, as in a real embedding table.

use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Size of the stand-in vocabulary that token ids are drawn from (GPT-2's, for scale).
pub const VOCAB_SIZE: u64 = 50_257;

/// FNV-1a, 64 bit: a stable hash of bytes (the same on every platform and run).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// The token's id in the stand-in vocabulary.
pub fn token_id(token: &str) -> u64 {
    fnv1a(token.as_bytes()) % VOCAB_SIZE
}

/// A random stream for (seed, name): the seed's 8 bytes then the name's hash, little
/// endian, then zeros.
fn stream(seed: u64, name: &str) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&fnv1a(name.as_bytes()).to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

/// A value uniform in [-1, 1): the top 53 bits of one word, scaled exactly.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    let bits = rng.next_u64() >> 11;
    (bits as f64) * (2.0 / (1u64 << 53) as f64) - 1.0
}

/// `len` values uniform in [-scale, scale) for (seed, name).
pub fn seeded_values(seed: u64, name: &str, len: usize, scale: f64) -> Vec<f64> {
    let mut rng = stream(seed, name);
    (0..len).map(|_| unit(&mut rng) * scale).collect()
}

/// The embedding of one token: d values in [-1, 1) drawn from (seed, "token:" + text).
pub fn token_vector(seed: u64, token: &str, d: usize) -> Vec<f64> {
    seeded_values(seed, &format!("token:{token}"), d, 1.0)
}

/// X [n, d]: one row per token.
pub fn embeddings(seed: u64, tokens: &[String], d: usize) -> Array2<f64> {
    let mut x = Array2::zeros((tokens.len(), d));
    for (mut row, t) in x.rows_mut().into_iter().zip(tokens) {
        row.iter_mut()
            .zip(token_vector(seed, t, d))
            .for_each(|(dst, v)| *dst = v);
    }
    x
}

/// A seeded weight matrix [rows, cols] with entries in [-1/sqrt(rows), 1/sqrt(rows)),
/// so that x W keeps roughly the scale of x (as Xavier-style initialisation does).
pub fn weight(seed: u64, name: &str, rows: usize, cols: usize) -> Array2<f64> {
    let scale = 1.0 / (rows.max(1) as f64).sqrt();
    let data = seeded_values(seed, &format!("weight:{name}"), rows * cols, scale);
    Array2::from_shape_vec((rows, cols), data).expect("rows * cols values")
}

/// The learned position table [n, d]: seeded stand-ins for trained position vectors,
/// in [-1, 1) like the embeddings. Row p depends only on (seed, p), so a longer sentence
/// keeps the rows of a shorter one.
pub fn learned_positions(seed: u64, n: usize, d: usize) -> Array2<f64> {
    let mut t = Array2::zeros((n, d));
    for (p, mut row) in t.rows_mut().into_iter().enumerate() {
        row.iter_mut()
            .zip(seeded_values(seed, &format!("position:{p}"), d, 1.0))
            .for_each(|(dst, v)| *dst = v);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_same_word_gets_the_same_vector_anywhere() {
        let toks: Vec<String> = ["the", "cat", "the"].map(String::from).to_vec();
        let x = embeddings(42, &toks, 8);
        assert_eq!(x.row(0), x.row(2));
        assert_ne!(x.row(0), x.row(1));
        assert_ne!(embeddings(43, &toks, 8).row(0), x.row(0));
    }

    #[test]
    fn values_are_in_range_and_pinned() {
        let v = seeded_values(42, "token:cat", 1000, 1.0);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.1, "mean {mean}");
        // Pinned to the bit: a change here changes every lesson's numbers.
        let first = token_vector(42, "cat", 2);
        assert_eq!(
            first.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            [0xbfa0_0f13_62bd_bcc0u64, 0x3fe5_9ea8_e78e_f814]
        );
        assert_eq!(token_vector(42, "cat", 4)[..2], first[..]);
    }

    #[test]
    fn learned_rows_do_not_depend_on_length() {
        let a = learned_positions(7, 3, 4);
        let b = learned_positions(7, 5, 4);
        assert_eq!(a.row(2), b.row(2));
    }
}
