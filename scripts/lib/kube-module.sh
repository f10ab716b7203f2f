# Shared by scripts/control-plane.sh and scripts/node-binaries.sh: a Go module of ours that requires
# k8s.io/kubernetes at one version, and the ldflags that stamp that version into the binaries.
#
# k8s.io/kubernetes points its k8s.io/<staging> modules at folders of its own repository; a module of
# ours must pin each of them to the published v0.X.Y instead. The list is taken from the pinned go.mod.

# kube_module DIR MODULE VERSION: write DIR/go.mod for MODULE requiring k8s.io/kubernetes@VERSION.
kube_module() {
  local dir="$1" module="$2" version="$3" staging gomod
  staging="v0.${version#v1.}"
  (
    cd "$dir"
    go mod download -json "k8s.io/kubernetes@$version" >download.json
    gomod=$(python3 -c 'import json,sys; print(json.load(open("download.json"))["GoMod"])')
    {
      echo "module $module"
      echo
      sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -1
      echo
      echo "require k8s.io/kubernetes $version"
      echo
      echo "replace ("
      sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*$#\t\1 => \1 '"$staging"'#p' "$gomod"
      echo ")"
    } >go.mod
  )
}

# kube_ldflags VERSION: -ldflags for `go build` so the binaries report VERSION as kubectl's do.
kube_ldflags() {
  local version="$1" minor pkg flags="-s -w"
  minor="${version#v1.}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags="$flags -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*}"
    flags="$flags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}
