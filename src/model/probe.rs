//! The standard probe for induction heads (Olsson et al. 2022): random tokens, then the
//! same tokens again. `attnviz heads` scores heads on it by default, and lessons on real
//! models can run on it.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::ModelTokenizer;
use crate::error::{Error, Result};

/// Length T of the random half of `heads`' default sequence.
pub const REPEAT_T: usize = 50;

/// The model's BOS if its tokenizer adds one, then `t` random non-special ids from
/// ChaCha8(`seed`), then the same ids again.
pub fn repeated_random(
    tok: &ModelTokenizer,
    vocab: usize,
    t: usize,
    seed: u64,
) -> Result<Vec<u32>> {
    let vocab = vocab.min(tok.vocab_size());
    let candidates = (0..vocab as u32).filter(|&i| !tok.is_special(i)).count();
    if candidates == 0 {
        return Err(Error::usage(
            "the model's vocabulary has no ordinary tokens to draw a random sequence from; give --text or --ids",
        ));
    }
    let mut ids = Vec::with_capacity(2 * t + 1);
    if let Some(bos) = tok.bos_id()
        && tok.encode("")?.first() == Some(&bos)
    {
        ids.push(bos);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut half = Vec::with_capacity(t);
    while half.len() < t {
        let id = rng.random_range(0..vocab as u32);
        if !tok.is_special(id) {
            half.push(id);
        }
    }
    ids.extend_from_slice(&half);
    ids.extend_from_slice(&half);
    Ok(ids)
}
