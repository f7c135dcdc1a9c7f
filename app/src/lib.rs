//! The Deck console (server-rendered). Pages land with the console issue.
