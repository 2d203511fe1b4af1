"""What collectors and checks both know, with its sources: GPU models, laptops, Docker's
settings, addresses, routes, sudoers' grammar and matching, the provider-agent catalogue.
Pure: nothing here touches the machine."""
