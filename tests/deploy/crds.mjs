// Validates custom resources (JSON lines on stdin) with the @kubernetes-models validators
// that scripts/k8s-schemas installs (its directory is argv[2]); prints one JSON line per
// resource: {"kind", "name", "errors"} (errors: null when valid).
import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const models = join(process.argv[2], "node_modules", "@kubernetes-models");
const classes = {
  "networking.istio.io/v1alpha3 EnvoyFilter": ["istio", "networking.istio.io/v1alpha3/EnvoyFilter.js", "EnvoyFilter"],
  "monitoring.coreos.com/v1 ServiceMonitor": ["prometheus-operator", "monitoring.coreos.com/v1/ServiceMonitor.js", "ServiceMonitor"],
};
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const resource = JSON.parse(line);
  const found = classes[`${resource.apiVersion} ${resource.kind}`];
  let errors = null;
  if (!found) {
    errors = ["no validator for this kind"];
  } else {
    const [pkg, file, name] = found;
    const module = await import(pathToFileURL(join(models, pkg, file)).href);
    try {
      new module[name](resource).validate();
    } catch (error) {
      errors = [String(error.message || error)];
    }
  }
  console.log(JSON.stringify({ kind: resource.kind, name: resource.metadata.name, errors }));
}
