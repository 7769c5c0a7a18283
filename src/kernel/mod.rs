//! The fast fp32 path: one tiled online-softmax algorithm, its vector ops dispatched at run time (AVX-512, AVX2, NEON, scalar); threads.
