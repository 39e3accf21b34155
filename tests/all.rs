mod suite;
mod support;
