package invocation

import (
	"context"
	"sort"
	"sync"
)

// Directory routes requests to the surface of the Connection they name: the shape of a gateway
// serving every activated deployment. The operator (or whoever watches activations) Puts a new
// surface when a deployment activates a snapshot and Removes it when the deployment is no longer
// Ready; a request for a Connection with no surface is refused as "wrong_connection". It is safe
// for concurrent use.
type Directory struct {
	mu       sync.RWMutex
	surfaces map[string]*Surface
}

// NewDirectory returns an empty directory.
func NewDirectory() *Directory { return &Directory{surfaces: map[string]*Surface{}} }

// Put makes s the surface of its Connection, replacing (and closing) the previous one. Leases
// issued by the previous surface are stale on the new one when the snapshot changed.
func (d *Directory) Put(s *Surface) {
	d.mu.Lock()
	old := d.surfaces[s.connection]
	d.surfaces[s.connection] = s
	d.mu.Unlock()
	if old != nil && old != s {
		_ = old.Close()
	}
}

// Remove drops (and closes) the surface of connection, if any.
func (d *Directory) Remove(connection string) {
	d.mu.Lock()
	old := d.surfaces[connection]
	delete(d.surfaces, connection)
	d.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

// Surface returns the surface of connection.
func (d *Directory) Surface(connection string) (*Surface, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s, ok := d.surfaces[connection]
	return s, ok
}

// Connections returns the Connections that have a surface, sorted.
func (d *Directory) Connections() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.surfaces))
	for c := range d.surfaces {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Describe is Surface.Describe on the surface of connection.
func (d *Directory) Describe(ctx context.Context, caller Caller, operation, connection string) (*Description, error) {
	s, ok := d.Surface(connection)
	if !ok {
		return nil, refuse(RefusalWrongConnection, "", ErrWrongConnection)
	}
	return s.Describe(ctx, caller, operation, connection)
}

// List is Surface.List on the surface of connection.
func (d *Directory) List(ctx context.Context, caller Caller, connection string) ([]*Description, error) {
	s, ok := d.Surface(connection)
	if !ok {
		return nil, refuse(RefusalWrongConnection, "", ErrWrongConnection)
	}
	return s.List(ctx, caller, connection)
}

// Invoke is Surface.Invoke on the surface of req.Connection.
func (d *Directory) Invoke(ctx context.Context, req Request) (*Result, error) {
	s, ok := d.Surface(req.Connection)
	if !ok {
		return nil, refuse(RefusalWrongConnection, "", ErrWrongConnection)
	}
	return s.Invoke(ctx, req)
}

// Close closes every surface's session and empties the directory.
func (d *Directory) Close() error {
	d.mu.Lock()
	all := d.surfaces
	d.surfaces = map[string]*Surface{}
	d.mu.Unlock()
	for _, s := range all {
		_ = s.Close()
	}
	return nil
}
