"""Policy hooks: code the organisation (and, tightening only, a user or a
trusted project) asks about every call before it runs and every result after
(docs/architecture.md, "Policy hooks"). `declaration` reads them from the
settings files, `calling` asks one (a Python callable, an HTTP endpoint or a
command), `pre` judges a call by their answers, `post` notes a result."""
