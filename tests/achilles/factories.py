"""factory_boy factories shared by every module's tests."""

import factory
from django.contrib.auth.models import Group

from achilles.models import AllowedModel, User


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    password = factory.django.Password("pass-word-123")
    timezone = None

    @factory.post_generation
    def groups(self, create, extracted, **kwargs):
        for name in extracted or ():
            group, _ = Group.objects.get_or_create(name=name)
            self.groups.add(group)


class AllowedModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AllowedModel

    name = factory.Sequence(lambda n: f"model-{n}")
    provider = "builtin"
    kind = "chat"
    context_window = 8192
    is_default = False
    options = factory.LazyFunction(dict)

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        # through the allow-list's action, as the admin and the commands add models
        from achilles.services import allowed_model_create

        return allowed_model_create(**kwargs)
