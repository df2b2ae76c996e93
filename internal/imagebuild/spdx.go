package imagebuild

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"time"
)

// SBOMMediaType is the media type of the SBOM blob and the artifactType of its referrer manifest.
const SBOMMediaType = "application/spdx+json"

type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string         `json:"name"`
	SPDXID           string         `json:"SPDXID"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	PrimaryPurpose   string         `json:"primaryPurpose,omitempty"`
	ExternalRefs     []spdxExtRef   `json:"externalRefs,omitempty"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
}

type spdxExtRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]`)

func spdxID(kind, name, version string) string {
	return "SPDXRef-" + kind + "-" + spdxIDUnsafe.ReplaceAllString(name+"-"+version, "-")
}

// SPDX returns an SPDX 2.3 JSON document for the binaries at paths (name -> file), read from their
// Go build information (`go version -m`): one APPLICATION package per binary, one LIBRARY package
// per module it links (purl pkg:golang/...), and the Go standard library. It is deterministic:
// created is o.SourceDate and every list is sorted.
func SPDX(o Options, paths map[string]string) ([]byte, error) {
	doc := spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "connector-mcp-" + o.Version,
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s", o.Source, o.Revision),
		CreationInfo: spdxCreation{
			Created:  o.SourceDate.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: connector-mcp-hack-image", "Organization: b10x"},
		},
	}
	libs := map[string]spdxPackage{}
	var rels []spdxRelationship
	for _, b := range o.Binaries {
		info, err := buildinfo.ReadFile(paths[b.Name])
		if err != nil {
			return nil, fmt.Errorf("imagebuild: build info of %s: %w", b.Name, err)
		}
		appID := spdxID("Application", b.Name, o.Version)
		doc.Packages = append(doc.Packages, spdxPackage{
			Name: b.Name, SPDXID: appID, VersionInfo: o.Version, DownloadLocation: o.Source,
			PrimaryPurpose: "APPLICATION",
			ExternalRefs: []spdxExtRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
				ReferenceLocator: "pkg:golang/" + info.Main.Path + "@" + o.Version + "#" + info.Path[len(info.Main.Path):]}},
		})
		rels = append(rels, spdxRelationship{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: appID})
		deps := []spdxPackage{{Name: "stdlib", VersionInfo: info.GoVersion, SPDXID: spdxID("Package", "stdlib", info.GoVersion),
			ExternalRefs: []spdxExtRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: "pkg:golang/stdlib@" + info.GoVersion}}}}
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			p := spdxPackage{Name: m.Path, VersionInfo: m.Version, SPDXID: spdxID("Package", m.Path, m.Version),
				ExternalRefs: []spdxExtRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: "pkg:golang/" + m.Path + "@" + m.Version}}}
			deps = append(deps, p)
		}
		for _, p := range deps {
			p.DownloadLocation, p.PrimaryPurpose = "NOASSERTION", "LIBRARY"
			libs[p.SPDXID] = p
			rels = append(rels, spdxRelationship{Element: appID, Type: "DEPENDS_ON", Related: p.SPDXID})
		}
	}
	ids := make([]string, 0, len(libs))
	for id := range libs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, libs[id])
	}
	sort.SliceStable(rels, func(i, j int) bool {
		if rels[i].Element != rels[j].Element {
			return rels[i].Element < rels[j].Element
		}
		return rels[i].Related < rels[j].Related
	})
	doc.Relationships = rels
	return json.MarshalIndent(doc, "", "  ")
}
