//! Fonts for GIF recordings: DejaVu Sans Mono (regular and bold) built into the binary
//! for Latin, Greek, symbols and box drawing, and a CJK font from the system (common
//! paths of Noto CJK, WenQuanYi, Droid Sans Fallback, PingFang, Microsoft YaHei...) or
//! `--font FILE`. Glyphs are rasterised by `ab_glyph` once per character and face, and
//! their coverage kept in a few levels so a frame needs few colours.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ab_glyph::{Font, FontArc, FontVec, GlyphId, PxScale, ScaleFont, point};

use crate::error::{Error, Result};

/// One cell of a GIF in pixels: a monospace advance of 10 px and a line of 20 px.
pub const CELL_W: u32 = 10;
pub const CELL_H: u32 = 20;
/// Coverage levels a glyph's edge is rounded to (0 = background .. LEVELS = glyph).
pub const LEVELS: u8 = 4;
/// The em of CJK glyphs in pixels: nearly the full height of a row (and two cells wide).
const CJK_EM: f32 = 18.0;

const REGULAR: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansMono.ttf");
const BOLD: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansMono-Bold.ttf");

/// Where CJK fonts usually are, with the face to take from a collection (Noto's .ttc
/// holds Japanese, Korean, Simplified and Traditional Chinese; index 2 is SC).
pub const CJK_CANDIDATES: &[(&str, u32)] = &[
    ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2),
    ("/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc", 2),
    (
        "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
        2,
    ),
    ("/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc", 2),
    (
        "/usr/share/fonts/google-noto-sans-cjk-vf-fonts/NotoSansCJK-VF.ttc",
        2,
    ),
    ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", 0),
    ("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc", 0),
    (
        "/usr/share/fonts/wenquanyi/wqy-microhei/wqy-microhei.ttc",
        0,
    ),
    ("/usr/share/fonts/wqy-microhei/wqy-microhei.ttc", 0),
    (
        "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
        0,
    ),
    (
        "/usr/share/fonts/google-droid-sans-fonts/DroidSansFallbackFull.ttf",
        0,
    ),
    ("/usr/share/fonts/truetype/arphic/uming.ttc", 0),
    ("/System/Library/Fonts/PingFang.ttc", 0),
    ("/System/Library/Fonts/STHeiti Light.ttc", 0),
    ("/Library/Fonts/Arial Unicode.ttf", 0),
    ("C:\\Windows\\Fonts\\msyh.ttc", 0),
    ("C:\\Windows\\Fonts\\simsun.ttc", 0),
];

/// What to install when no CJK font is found.
pub const CJK_HINT: &str = "install a CJK font (Debian/Ubuntu: apt install fonts-noto-cjk; Fedora: dnf install google-noto-sans-cjk-fonts; Arch: pacman -S noto-fonts-cjk) or pass --font FILE";

/// A glyph's coverage, placed relative to the top-left of its cell(s).
#[derive(Debug, Clone)]
pub struct Bitmap {
    pub left: i32,
    pub top: i32,
    pub width: u32,
    pub height: u32,
    /// Row-major coverage in 0..=LEVELS.
    pub coverage: Vec<u8>,
}

/// A face with how to place its glyphs in a cell.
struct Face {
    font: FontArc,
    scale: PxScale,
    baseline: f32,
    /// Centre each glyph on its cells (CJK fonts, whose advances are not the grid's).
    centre: bool,
}

impl Face {
    /// A monospace face whose advance is exactly one cell.
    fn grid(font: FontArc) -> Face {
        let id = font.glyph_id('0');
        let height = font.height_unscaled();
        let advance = font.h_advance_unscaled(id).max(1.0);
        let px = CELL_W as f32 * height / advance;
        let factor = px / height;
        let baseline = (CELL_H as f32 - px) / 2.0 + font.ascent_unscaled() * factor;
        Face {
            font,
            scale: PxScale::from(px),
            baseline,
            centre: false,
        }
    }

    /// A CJK face drawn at an em of [`CJK_EM`], its em box centred on the row.
    fn cjk(font: FontArc) -> Face {
        let em_units = font.units_per_em().unwrap_or(1000.0);
        let px = CJK_EM * font.height_unscaled() / em_units;
        // Ideographs fill the em box from about 0.12 em below the baseline to 0.88 above.
        let baseline = CELL_H as f32 / 2.0 + 0.38 * CJK_EM;
        Face {
            font,
            scale: PxScale::from(px),
            baseline,
            centre: true,
        }
    }

    fn has(&self, c: char) -> bool {
        self.font.glyph_id(c) != GlyphId(0)
    }

    fn rasterise(&self, c: char, cells: u32) -> Option<Bitmap> {
        let id = self.font.glyph_id(c);
        let scaled = self.font.as_scaled(self.scale);
        let x = if self.centre {
            ((cells * CELL_W) as f32 - scaled.h_advance(id)) / 2.0
        } else {
            0.0
        };
        let glyph = id.with_scale_and_position(self.scale, point(x, self.baseline));
        let outline = self.font.outline_glyph(glyph)?;
        let b = outline.px_bounds();
        let (width, height) = (b.width() as u32, b.height() as u32);
        let mut coverage = vec![0u8; (width * height) as usize];
        outline.draw(|x, y, c| {
            if x < width && y < height {
                let level = (c.clamp(0.0, 1.0) * f32::from(LEVELS)).round() as u8;
                coverage[(y * width + x) as usize] = level;
            }
        });
        Some(Bitmap {
            left: b.min.x as i32,
            top: b.min.y as i32,
            width,
            height,
            coverage,
        })
    }
}

/// The faces a GIF is drawn with, and the glyphs drawn so far.
pub struct Fonts {
    regular: Face,
    bold: Face,
    cjk: Option<Face>,
    source: CjkFont,
    candidates: &'static [(&'static str, u32)],
    cache: HashMap<(char, bool, u32), Option<Bitmap>>,
}

/// Where the CJK face came from, for the message after recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CjkFont {
    /// `--font FILE`.
    Given(PathBuf),
    /// Found at this path.
    Found(PathBuf),
    /// None was looked for: no character drawn so far is missing from the built-in font.
    NotNeeded,
    /// None was found.
    Missing,
}

fn builtin(bytes: &'static [u8], name: &str) -> Result<FontArc> {
    FontArc::try_from_slice(bytes)
        .map_err(|e| Error::Internal(format!("the built-in font {name} cannot be read: {e}")))
}

fn open(path: &Path, index: u32) -> std::result::Result<FontArc, String> {
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    FontVec::try_from_vec_and_index(data, index)
        .map(FontArc::new)
        .map_err(|e| format!("not a TrueType/OpenType font ({e})"))
}

impl Fonts {
    /// The built-in faces, and a CJK face from `font`, or else from the system the first
    /// time a character the built-in font lacks is drawn.
    pub fn load(font: Option<&Path>) -> Result<Fonts> {
        Fonts::load_from(font, CJK_CANDIDATES)
    }

    /// [`Fonts::load`] looking for a CJK font at `candidates` (path, face in a collection).
    pub fn load_from(
        font: Option<&Path>,
        candidates: &'static [(&'static str, u32)],
    ) -> Result<Fonts> {
        let regular = Face::grid(builtin(REGULAR, "DejaVu Sans Mono")?);
        let bold = Face::grid(builtin(BOLD, "DejaVu Sans Mono Bold")?);
        let (cjk, source) = match font {
            Some(path) => {
                let f = open(path, 0).map_err(|why| {
                    Error::usage(format!(
                        "--font {}: {why}; give a .ttf, .otf or .ttc file",
                        path.display()
                    ))
                })?;
                (Some(Face::cjk(f)), CjkFont::Given(path.to_path_buf()))
            }
            None => (None, CjkFont::NotNeeded),
        };
        Ok(Fonts {
            regular,
            bold,
            cjk,
            source,
            candidates,
            cache: HashMap::new(),
        })
    }

    /// Where the CJK face came from: [`CjkFont::NotNeeded`] until some character the
    /// built-in font lacks has been drawn.
    pub fn cjk_source(&self) -> &CjkFont {
        &self.source
    }

    /// Look for a system CJK face, once, when `c` is not in the built-in font.
    fn want(&mut self, c: char) {
        if self.source != CjkFont::NotNeeded || self.regular.has(c) {
            return;
        }
        (self.cjk, self.source) = self
            .candidates
            .iter()
            .find_map(|&(p, index)| {
                let path = Path::new(p);
                let f = open(path, index).or_else(|_| open(path, 0)).ok()?;
                Some((Some(Face::cjk(f)), CjkFont::Found(path.to_path_buf())))
            })
            .unwrap_or((None, CjkFont::Missing));
    }

    /// The glyph of `c` over `cells` cells, or `None` when no face has it (it is then
    /// drawn as a box).
    pub fn glyph(&mut self, c: char, bold: bool, cells: u32) -> Option<&Bitmap> {
        self.want(c);
        let (regular, bold_face, cjk) = (&self.regular, &self.bold, &self.cjk);
        self.cache
            .entry((c, bold, cells))
            .or_insert_with(|| {
                let latin = if bold { bold_face } else { regular };
                if latin.has(c) {
                    // A space or other blank glyph has no outline: nothing to draw.
                    return latin.rasterise(c, cells).or(Some(Bitmap::EMPTY));
                }
                match cjk {
                    Some(f) if f.has(c) => f.rasterise(c, cells).or(Some(Bitmap::EMPTY)),
                    _ => None,
                }
            })
            .as_ref()
    }

    /// Is `c` drawn by some face?
    pub fn has(&self, c: char) -> bool {
        self.regular.has(c) || self.cjk.as_ref().is_some_and(|f| f.has(c))
    }
}

impl Bitmap {
    const EMPTY: Bitmap = Bitmap {
        left: 0,
        top: 0,
        width: 0,
        height: 0,
        coverage: Vec::new(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_glyphs_fill_their_cell_and_blanks_draw_nothing() {
        let mut fonts = Fonts::load_from(None, &[]).unwrap();
        assert_eq!(fonts.cjk_source(), &CjkFont::NotNeeded);
        let m = fonts.glyph('M', false, 1).unwrap().clone();
        assert!(m.width >= 6 && m.width <= CELL_W, "{m:?}");
        assert!(m.top >= 0 && (m.top as u32 + m.height) <= CELL_H, "{m:?}");
        assert!(m.coverage.contains(&LEVELS));
        assert!(m.coverage.iter().all(|&c| c <= LEVELS));
        assert_eq!(fonts.glyph(' ', false, 1).unwrap().width, 0);
        // The built-in font has no ideographs.
        assert!(fonts.glyph('注', false, 2).is_none());
        assert!(!fonts.has('注'));
        // Drawing it looked for a CJK face, and found none among no candidates.
        assert_eq!(fonts.cjk_source(), &CjkFont::Missing);
    }

    #[test]
    fn a_font_file_that_is_not_a_font_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("not-a-font.ttf");
        std::fs::write(&bad, b"hello").unwrap();
        let err = Fonts::load(Some(&bad)).err().unwrap();
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains("not-a-font.ttf"), "{err}");
    }
}
