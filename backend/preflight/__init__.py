"""Deploy pre-flight, one job per module: will the application fit (`fit`), can the
cluster's Python import its code (`env_probe`), is the cluster's Ray a version this
console knows (`versions`)."""
