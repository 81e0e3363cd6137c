"""What every part of the service shares: loading the registry and the spec files (`loading`),
log lines (`logs`), whose work it is (`tenancy`), the heap tuning of long-lived processes
(`runtime`), the API process's memory ceiling (`memory`) and JSON out of the service
(`fastjson`)."""
