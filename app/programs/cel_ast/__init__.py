"""CEL's AST as protobuf messages: protoc's output for cel-spec's syntax.proto and
checked.proto (README.md says how it is made). Not Herald's code: read, never edited."""
