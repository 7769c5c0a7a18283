//! The views of the app, by name: the same names scene files use (`view = "flash"`), so
//! the app's list and the scenes' are one list, [`SceneView`].

pub use crate::scene::SceneView as ViewKind;
