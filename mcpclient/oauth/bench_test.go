package oauth

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkXDGStoreLoad measures what every mcpctl verb against an HTTP server pays to find its
// credential: directory and file custody checks, bounded read, strict decode.
func BenchmarkXDGStoreLoad(b *testing.B) {
	s := NewXDGStore(filepath.Join(b.TempDir(), "oauth"))
	c := testCred("https://mcp.example/mcp", "https://as.example", "tok")
	if err := s.Save(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Load(context.Background(), c.Key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkXDGStoreSave measures one atomic replace (temporary file, fsync, rename, directory
// fsync), paid once per obtained or refreshed token.
func BenchmarkXDGStoreSave(b *testing.B) {
	s := NewXDGStore(filepath.Join(b.TempDir(), "oauth"))
	c := testCred("https://mcp.example/mcp", "https://as.example", "tok")
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Save(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}
