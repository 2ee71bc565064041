//! cross_entropy's gradient device code: cross_entropy's own entries (kernels/cross_entropy/kernel.rs:
//! `cross_entropy_rows`, `cross_entropy_row`, `cross_entropy_split`, versions 1-3) with GRAD on. Per
//! row, with g the row's scale (the losses' gradient, times 1 / the rows counted for a mean), dx = g
//! (softmax(x) - ε / n - (1 - ε) [j == t]), 0 for an ignored row: the row's max and sum of exp from a
//! first pass over its column tiles (in version 3 over each chunk's, then exchanged), the gradient
//! from a second (LOSS on as well: the training op's launch writes the losses in the same pass).
