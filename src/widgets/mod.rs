//! Reusable ratatui widgets: heatmap, matrix, vector, legend, bars.
