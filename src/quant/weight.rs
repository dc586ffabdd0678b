//! A weight matrix as the numerics read it: a checked view of whole-block rows in place in
//! shared bytes (a GGUF file's, or a test's own). It lives here, below `math` and `model`,
//! because both read it: `math` multiplies by it, `model` builds it from the file's tensor
//! table, and neither may depend on the other through it.

use std::sync::Arc;

use super::{GgmlType, QuantError};

/// A 2-D weight matrix: `rows` rows of `cols` elements of type `ty`, each row a whole number
/// of blocks, viewed in place in the (shared) file bytes.
#[derive(Clone)]
pub struct Weight {
    pub name: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    data: Arc<Vec<u8>>,
    offset: usize,
    row_bytes: usize,
}

impl std::fmt::Debug for Weight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Weight({} {} {}x{})",
            self.name, self.ty, self.rows, self.cols
        )
    }
}

impl Weight {
    /// A view of `rows * row_bytes(cols)` bytes of `data` starting at `offset`.
    pub fn view(
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        data: Arc<Vec<u8>>,
        offset: usize,
    ) -> Result<Weight, QuantError> {
        let row_bytes = ty
            .row_bytes(cols as u64)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| QuantError::Tensor {
                name: name.to_string(),
                ty,
                why: format!(
                    "row length {cols} is not a multiple of the block length {}",
                    ty.block_len()
                ),
            })?;
        let total = row_bytes
            .checked_mul(rows)
            .ok_or_else(|| QuantError::Tensor {
                name: name.to_string(),
                ty,
                why: format!("{rows} rows of {row_bytes} bytes overflow"),
            })?;
        if offset.checked_add(total).is_none_or(|end| end > data.len()) {
            return Err(QuantError::Tensor {
                name: name.to_string(),
                ty,
                why: format!(
                    "{total} bytes at offset {offset} exceed the {} available",
                    data.len()
                ),
            });
        }
        Ok(Weight {
            name: name.to_string(),
            ty,
            rows,
            cols,
            data,
            offset,
            row_bytes,
        })
    }

    /// A weight owning its bytes (tests, synthetic data).
    pub fn from_bytes(
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: Vec<u8>,
    ) -> Result<Weight, QuantError> {
        let w = Weight::view(name, ty, rows, cols, Arc::new(bytes), 0)?;
        if w.n_bytes() != w.data.len() {
            return Err(QuantError::Tensor {
                name: name.to_string(),
                ty,
                why: format!("{} bytes given, {} expected", w.data.len(), w.n_bytes()),
            });
        }
        Ok(w)
    }

    /// Row `i` (`i < rows`; the caller's index comes from a checked shape).
    #[inline]
    pub fn row(&self, i: usize) -> &[u8] {
        let s = self.offset + i * self.row_bytes;
        &self.data[s..s + self.row_bytes]
    }
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }
    /// All rows.
    pub fn bytes(&self) -> &[u8] {
        &self.data[self.offset..self.offset + self.n_bytes()]
    }
    pub fn n_bytes(&self) -> usize {
        self.rows * self.row_bytes
    }
}
